"""Fixtures of the transformer tests: every store backend, as the store tests build them
(``store_factory``: memory, filesystem, zip, LMDB, SQLite, and PostgreSQL when
``KVZARR_TEST_POSTGRES_URL`` names a server)."""

from tests.stores.conftest import BACKENDS, StoreFactory, store_factory  # noqa: F401
