"""Schema version 1: the key/value table.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade(table: str) -> None:
    # Keys compare in code-point order: SQLite BINARY and PostgreSQL "C" compare UTF-8 bytes.
    collation = "C" if op.get_context().dialect.name == "postgresql" else "BINARY"
    op.create_table(table,
                    sa.Column("k", sa.Text(collation=collation), primary_key=True),
                    sa.Column("v", sa.LargeBinary, nullable=False))


def downgrade(table: str) -> None:
    op.drop_table(table)
