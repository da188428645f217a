"""The PostgreSQL server of the ``pg`` systems: named by an environment variable (they
report n/a without it), one table per location, dropped again after use."""

from __future__ import annotations

import os

#: the environment variable that names the server (a SQLAlchemy / libpq URL)
POSTGRES_URL = "KVZARR_BENCH_POSTGRES_URL"


def pg_table(tag: str) -> str:
    """A table name for one location on the PostgreSQL server: unique to this run's
    process, lowercase letters, digits and '_' (what the SQL store takes)."""
    return f"kb{os.getpid()}_{tag}".replace("-", "_").lower()[:40]


def drop_pg_tables(url: str, names: list[str]) -> None:
    """Drop ``names`` on the server at ``url`` (untimed cleanup)."""
    import sqlalchemy as sa
    engine = sa.create_engine("postgresql+psycopg2://" + libpq_url(url).partition("://")[2])
    try:
        with engine.begin() as conn:
            for name in names:
                conn.exec_driver_sql(f'DROP TABLE IF EXISTS "{name}"')
    finally:
        engine.dispose()


def libpq_url(url: str) -> str:
    """``url`` without a SQLAlchemy driver name (``postgresql+psycopg2://`` ->
    ``postgresql://``), as psycopg2 takes it."""
    scheme, sep, rest = url.partition("://")
    return f"{scheme.split('+')[0]}{sep}{rest}"
