"""Schema version 2: the info table, and uncompressed TOAST storage on PostgreSQL.

Revision ID: 0002
Revises: 0001

``<table>_info(name, value)`` names the format (``format = kvzarr.sql``) and the kvzarr
that wrote the schema (``written_by``), so tools can tell a kvzarr store from any other
table. On PostgreSQL, values are stored EXTERNAL (out of line, not compressed again: Zarr
codecs compress already), which lets ``substring`` read only the TOAST chunks a byte
range needs; rows written before the upgrade keep their old storage until rewritten.
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade(table: str) -> None:
    info = op.create_table(f"{table}_info",
                           sa.Column("name", sa.Text, primary_key=True),
                           sa.Column("value", sa.Text, nullable=False))
    try:
        from kvzarr import __version__ as version
    except ImportError:  # offline SQL rendered by the alembic command alone
        version = "unknown"
    op.bulk_insert(info, [{"name": "format", "value": "kvzarr.sql"},
                          {"name": "written_by", "value": f"kvzarr {version}"}])
    if op.get_context().dialect.name == "postgresql":
        op.execute(f'ALTER TABLE "{table}" ALTER COLUMN v SET STORAGE EXTERNAL')


def downgrade(table: str) -> None:
    if op.get_context().dialect.name == "postgresql":
        op.execute(f'ALTER TABLE "{table}" ALTER COLUMN v SET STORAGE EXTENDED')
    op.drop_table(f"{table}_info")
