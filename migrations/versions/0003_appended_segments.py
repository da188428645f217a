"""Schema version 3: appendable values (the segments table).

Revision ID: 0003
Revises: 0002

``<table>_segments(k, e, v)`` holds the parts of values that were appended to
(``Store.append``): the segment ``v`` ends at byte ``e`` of the value of key ``k``, so the
value is its segments in order of ``e``. Such a value's row in the key/value table keeps
its key with an empty ``v`` (an empty value is read through the segments table, which is
then empty for it); every other value is its row, as before. Appending inserts one
segment row: the bytes already stored are never rewritten. On PostgreSQL segments are
stored EXTERNAL like values, so ``substring`` reads only the TOAST chunks it needs.

Nothing is copied: a store upgraded from version 2 has no appended value yet.
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade(table: str) -> None:
    collation = "C" if op.get_context().dialect.name == "postgresql" else "BINARY"
    op.create_table(f"{table}_segments",
                    sa.Column("k", sa.Text(collation=collation), primary_key=True),
                    sa.Column("e", sa.BigInteger, primary_key=True, autoincrement=False),
                    sa.Column("v", sa.LargeBinary, nullable=False))
    if op.get_context().dialect.name == "postgresql":
        op.execute(f'ALTER TABLE "{table}_segments" ALTER COLUMN v SET STORAGE EXTERNAL')


def downgrade(table: str) -> None:
    op.drop_table(f"{table}_segments")
