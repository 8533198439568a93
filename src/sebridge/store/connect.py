"""Which dialect a store.url names: the one place that knows both (database.py knows none)."""

from __future__ import annotations

from sebridge.kernel.errors import StoreError
from sebridge.store.database import Database

__all__ = ["open_database"]


def open_database(url: str) -> Database:
    """The dialect for store.url: sqlite:// (the default) or postgresql:// / postgres://."""
    scheme = url.partition(":")[0]
    if scheme == "sqlite":
        from sebridge.store.sqlite import SqliteDatabase

        return SqliteDatabase(url)
    if scheme in ("postgresql", "postgres"):
        from sebridge.store.postgres import PostgresDatabase

        return PostgresDatabase(url)
    # The URL may carry a password: name its scheme only.
    raise StoreError(f"store.url: {scheme}:// is not supported; use sqlite:// or postgresql://")
