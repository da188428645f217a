"""Schema of the SQL store: finding the layout of a database, creating the current schema,
checking its version on open, and upgrading it with the migrations in ``migrations/``.
Specification: stores/sql.md, sections "Key layout / schema" and "Format version and
migrations".

Promises:

* Opening never changes an existing schema. A kvzarr schema older than
  :data:`SCHEMA_VERSION` raises :class:`SchemaVersionError` naming the command
  ``kvzarr upgrade URL``; a newer one asks for a newer kvzarr.
* Files of zarr-python 2's SQLiteStore (table ``zarr``) and of zarr-sqlite (``zarr`` plus
  ``sqlitestore_metadata``) are used in their own layout; nothing is added to them.
* A new store is created at the current schema inside one locked write transaction, so
  processes that create the same store at once agree on one result.
* :func:`upgrade` runs the pending migrations in one write transaction holding the
  store's write lock: other processes see the old schema or the new one.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.schema import CreateTable

from ...errors import SchemaVersionError, StoreConfigError, StoreError
from .backends import Backend, open_backend, translate

#: alembic revision ids in order; the schema version is the position, counted from 1
REVISIONS = ("0001", "0002", "0003")
SCHEMA_VERSION = len(REVISIONS)
DEFAULT_TABLE = "kvzarr"
#: the table of zarr-python 2's SQLiteStore and of zarr-sqlite
LEGACY_TABLE = "zarr"
FORMAT_NAME = "kvzarr.sql"
#: env.py of the migrations holds this line; it tells our migrations from others'
MIGRATIONS_MARKER = "kvzarr SQL store migrations"

KVZARR, ZARR_PYTHON_2, ZARR_SQLITE = "kvzarr", "zarr-python-2", "zarr-sqlite"


@dataclass(frozen=True)
class Layout:
    """What a database holds: the key/value table, whose layout it is, and for kvzarr's
    own layout the schema version (None for the legacy layouts)."""
    table: str
    kind: str
    version: int | None


def check_table_name(table: str, display: str) -> str:
    if not (isinstance(table, str) and 0 < len(table) <= 40 and table.isascii()
            and (table[0].isalpha() or table[0] == "_")
            and all(c.islower() or c.isdigit() or c == "_" for c in table)):
        raise StoreConfigError(
            "a table name is 1 to 40 lowercase ASCII letters, digits and '_', not starting "
            "with a digit", path=display, field="table")
    return table


def head_tables(table: str, dialect_name: str) -> list[sa.Table]:
    """The tables of the current schema, as the migrations create them."""
    meta = sa.MetaData()
    collation = "C" if dialect_name == "postgresql" else "BINARY"
    version = sa.Table(f"{table}_version", meta,
                       sa.Column("version_num", sa.String(32), nullable=False))
    # The exact shape alembic gives its version table, so alembic can manage it.
    version.append_constraint(
        sa.PrimaryKeyConstraint("version_num", name=f"{table}_version_pkc"))
    data = sa.Table(table, meta,
                    sa.Column("k", sa.Text(collation=collation), primary_key=True),
                    sa.Column("v", sa.LargeBinary, nullable=False))
    info = sa.Table(f"{table}_info", meta,
                    sa.Column("name", sa.Text, primary_key=True),
                    sa.Column("value", sa.Text, nullable=False))
    segments = sa.Table(f"{table}_segments", meta,
                        sa.Column("k", sa.Text(collation=collation), primary_key=True),
                        sa.Column("e", sa.BigInteger, primary_key=True, autoincrement=False),
                        sa.Column("v", sa.LargeBinary, nullable=False))
    return [version, data, info, segments]


def segments_table(table: str) -> str:
    """The table of appended values' segments (schema version 3)."""
    return f"{table}_segments"


def info_rows() -> list[tuple[str, str]]:
    version = getattr(sys.modules.get("kvzarr"), "__version__", "unknown")
    return [("format", FORMAT_NAME), ("written_by", f"kvzarr {version}")]


# --- finding what a database holds ----------------------------------------------------

def table_names(backend: Backend, cur: Any) -> set[str]:
    if backend.name == "sqlite":
        cur.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    else:
        cur.execute("SELECT table_name FROM information_schema.tables "
                    "WHERE table_schema = current_schema()")
    return {row[0] for row in cur.fetchall()}


def detect(backend: Backend, cur: Any, table: str | None) -> Layout | None:
    """The layout of the store in ``table`` (found automatically when None), or None if
    there is no store yet."""
    names = table_names(backend, cur)
    if table is None:
        if DEFAULT_TABLE in names or f"{DEFAULT_TABLE}_version" in names:
            table = DEFAULT_TABLE
        elif LEGACY_TABLE in names:
            table = LEGACY_TABLE
        else:
            return None
    if table == LEGACY_TABLE:
        if LEGACY_TABLE not in names:
            return None
        if "sqlitestore_metadata" in names:
            _check_zarr_sqlite(cur, backend)
            return Layout(table, ZARR_SQLITE, None)
        return Layout(table, ZARR_PYTHON_2, None)
    has_data, has_version = table in names, f"{table}_version" in names
    if not has_data and not has_version:
        return None
    if not has_version:
        raise SchemaVersionError(
            f"table {table!r} exists but has no version table: it was not written by kvzarr",
            path=backend.display, hint="choose another table name with table=...")
    if not has_data:
        raise SchemaVersionError(f"the data table {table!r} of this store is missing",
                                 path=backend.display)
    return Layout(table, KVZARR, read_version(backend, cur, table))


def read_version(backend: Backend, cur: Any, table: str) -> int | None:
    """The schema version in the version table; None for a revision this kvzarr does not
    know (a newer one)."""
    cur.execute(f'SELECT version_num FROM "{table}_version"')
    rows = cur.fetchall()
    if len(rows) != 1:
        raise SchemaVersionError(
            f"the version table {table}_version holds {len(rows)} rows instead of one",
            path=backend.display)
    rev = rows[0][0]
    return REVISIONS.index(rev) + 1 if rev in REVISIONS else None


def _check_zarr_sqlite(cur: Any, backend: Backend) -> None:
    """zarr-sqlite's own rule: reject a major version above 1 and unknown incompatible
    flags (its specification, "Table sqlitestore_metadata")."""
    cur.execute("SELECT k, v FROM sqlitestore_metadata "
                "WHERE k IN ('sqlitestore_version', 'incompatible_flags')")
    meta = dict(cur.fetchall())
    major = str(meta.get("sqlitestore_version", "1.0")).split(".")[0].strip()
    flags = [f for f in str(meta.get("incompatible_flags", "")).split(",") if f.strip()]
    if major != "1" or flags:
        raise SchemaVersionError(
            f"zarr-sqlite file version {meta.get('sqlitestore_version')!r} with incompatible "
            f"flags {flags} is not supported", path=backend.display,
            hint="it was written by a newer zarr-sqlite")


def check_version(layout: Layout, display: str) -> None:
    """Raise unless ``layout`` can be used as it is."""
    if layout.kind != KVZARR or layout.version == SCHEMA_VERSION:
        return
    if layout.version is None:
        raise SchemaVersionError(
            f"this store has a schema newer than this kvzarr knows (it knows versions up "
            f"to {SCHEMA_VERSION})", path=display,
            hint="upgrade kvzarr: pip install --upgrade kvzarr")
    raise SchemaVersionError(
        f"this store has schema version {layout.version}; this kvzarr uses schema version "
        f"{SCHEMA_VERSION}", path=display,
        hint=f"back it up, then run `{upgrade_command(display, layout.table)}` "
             f"(kvzarr never migrates a store silently)")


def upgrade_command(display: str, table: str) -> str:
    command = f"kvzarr upgrade {shlex.quote(display)}"
    return command if table == DEFAULT_TABLE else f"{command} --table {table}"


# --- creating -------------------------------------------------------------------------

def create(backend: Backend, cur: Any, table: str) -> None:
    """Create the current schema (inside the caller's write transaction)."""
    dialect = backend.engine.dialect
    for t in head_tables(table, backend.name):
        cur.execute(str(CreateTable(t).compile(dialect=dialect)))
    if backend.name == "postgresql":
        for name in (table, segments_table(table)):
            cur.execute(f'ALTER TABLE "{name}" ALTER COLUMN v SET STORAGE EXTERNAL')
    p = backend.placeholder
    cur.execute(f'INSERT INTO "{table}_version" (version_num) VALUES ({p})', (REVISIONS[-1],))
    for row in info_rows():
        cur.execute(f'INSERT INTO "{table}_info" (name, value) VALUES ({p}, {p})', row)


def open_layout(backend: Backend, table: str | None) -> Layout:
    """Find the store in the database, creating it if there is none and the backend is
    writable; check its version."""
    if table is not None:
        check_table_name(table, backend.display)
    conn = backend.connect()
    try:
        cur = conn.cursor()
        layout = detect(backend, cur, table)
        empty = layout is None and not table_names(backend, cur)
    except backend.errors as e:
        raise translate(e, path=backend.display, during="reading the schema") from e
    finally:
        conn.close()
    if layout is None:
        if backend.read_only:
            raise StoreError("there is no store in this database to open read-only",
                             path=backend.display)
        table = table or DEFAULT_TABLE
        if table == LEGACY_TABLE:
            raise StoreConfigError(f"table {LEGACY_TABLE!r} is reserved for zarr-python 2 and "
                             f"zarr-sqlite files", path=backend.display, field="table")
        if backend.name == "sqlite" and empty:  # a file with tables keeps its settings
            backend.prepare_new_file()  # type: ignore[attr-defined]
        backend.set_table(table)
        txn = backend.begin(write=True)
        try:
            layout = detect(backend, txn.cur, table)
            if layout is None:
                create(backend, txn.cur, table)
                layout = Layout(table, KVZARR, SCHEMA_VERSION)
        except BaseException as e:
            backend.rollback(txn)
            if isinstance(e, backend.errors):
                raise translate(e, path=backend.display, during="creating the store") from e
            raise
        backend.commit(txn)
    check_version(layout, backend.display)
    return layout


# --- upgrading ------------------------------------------------------------------------

def migrations_dir() -> Path:
    """The alembic script directory: ``kvzarr/_migrations`` in an installed wheel,
    ``migrations/`` beside the package in a source checkout or editable install."""
    package = Path(__file__).resolve().parents[2]
    for candidate in (package / "_migrations", package.parent / "migrations"):
        env = candidate / "env.py"
        if env.is_file() and MIGRATIONS_MARKER in env.read_text("utf-8", errors="replace"):
            return candidate
    raise StoreError("the SQL store's schema migrations are missing from this installation",
                     path=str(package), hint="reinstall kvzarr")


def upgrade(url: Any, *, table: str | None = None,
            busy_timeout: float = 30.0) -> tuple[int, int]:
    """Migrate the SQL store at ``url`` (a path or SQLAlchemy URL) to the current schema;
    return ``(old_version, new_version)``. A store already current is left as it is; a
    SQLite path where no file is raises StoreError and creates nothing."""
    backend = open_backend(url, read_only=False, busy_timeout=busy_timeout, retries=0,
                           for_migrations=True, must_exist=True)
    if table is not None:
        check_table_name(table, backend.display)
    try:
        with backend.engine.connect() as conn:
            with conn.begin():  # SQLite: BEGIN IMMEDIATE, through the engine's begin hook
                cur = conn.connection.cursor()
                layout = detect(backend, cur, table)
                if layout is None:
                    raise StoreError("there is no kvzarr store in this database",
                                     path=backend.display)
                if layout.kind != KVZARR:
                    raise SchemaVersionError(
                        f"this is a {layout.kind} file; kvzarr reads and writes it in its own "
                        f"layout, which has no kvzarr schema to upgrade", path=backend.display)
                backend.lock_in_sa(conn, layout.table)
                old = read_version(backend, cur, layout.table)
                if old is None:
                    check_version(Layout(layout.table, KVZARR, None), backend.display)
                if old == SCHEMA_VERSION:
                    return old, old
                _run_migrations(conn, layout.table)
                new = read_version(backend, cur, layout.table)
        return old, new  # type: ignore[return-value]
    except backend.errors as e:
        raise translate(e, path=backend.display, during="upgrading the schema") from e
    finally:
        backend.dispose()


def _run_migrations(conn: sa.Connection, table: str) -> None:
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()).replace("%", "%%"))
    cfg.attributes["connection"] = conn
    cfg.attributes["table"] = table
    command.upgrade(cfg, "head")
