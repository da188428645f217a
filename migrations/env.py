"""alembic environment of the kvzarr SQL store migrations.

Run through ``kvzarr upgrade URL`` (kvzarr.stores.sql.upgrade), which opens the
connection, begins the write transaction holding the store's write lock, and passes the
connection and the store's table name in ``config.attributes``. Offline mode
(``alembic upgrade --sql``) renders the SQL for a database administrator instead; it
takes the table from the ``kvzarr_table`` main option (default ``kvzarr``).
"""

from alembic import context

config = context.config
table = config.attributes.get("table") or config.get_main_option("kvzarr_table") or "kvzarr"
# Each store keeps its version in its own one-row table, so stores can share a database.
version_table = f"{table}_version"

if context.is_offline_mode():
    context.configure(url=config.get_main_option("sqlalchemy.url"),
                      version_table=version_table, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations(table=table)
else:
    connection = config.attributes.get("connection")
    if connection is None:
        raise RuntimeError("run these migrations with `kvzarr upgrade URL`")
    context.configure(connection=connection, version_table=version_table)
    # The caller's transaction is already open: alembic joins it, the caller commits.
    with context.begin_transaction():
        context.run_migrations(table=table)
