"""The SQL store: a Zarr store in one table of a SQLite file or a PostgreSQL database.
Specification: stores/sql.md. Schema migrations: ``migrations/`` (alembic), applied by
``kvzarr upgrade URL`` through :func:`upgrade`.

    >>> import tempfile, os
    >>> from kvzarr.stores.sql import SQLStore
    >>> path = os.path.join(tempfile.mkdtemp(), "data.db")
    >>> with SQLStore(path) as store:
    ...     with store.transaction():
    ...         store.set("a/zarr.json", b"{}")
    ...         store.set("a/c/0", b"\\x01\\x02")
    ...     sorted(store.list_dir("a/"))
    ['c/', 'zarr.json']
"""

from .schema import SCHEMA_VERSION, migrations_dir, upgrade
from .store import SQLStore

__all__ = ["SCHEMA_VERSION", "SQLStore", "migrations_dir", "upgrade"]
