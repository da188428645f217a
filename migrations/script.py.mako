"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}

Schema version = position of this revision in kvzarr.stores.sql.schema.REVISIONS.
Add the new id there and update the head schema (schema.head_tables / create) to match.
"""

from alembic import op
import sqlalchemy as sa
${imports if imports else ""}

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = None
depends_on = None


def upgrade(table: str) -> None:
    ${upgrades if upgrades else "pass"}


def downgrade(table: str) -> None:
    ${downgrades if downgrades else "pass"}
