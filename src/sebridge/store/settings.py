"""Values sebridge keeps across restarts (this VM's name, a generated link key).

Kept in the meta table, beside
the schema version, under "setting.<key>".
"""

from __future__ import annotations

from sebridge.store.database import Database

__all__ = ["Settings"]


class Settings:
    """Small named values, kept across restarts and shared by a fleet."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def get(self, key: str) -> str | None:
        """A value sebridge remembers across restarts (e.g. this VM's name)."""
        row = self._db.one("SELECT value FROM meta WHERE key = ?", (f"setting.{key}",))
        return str(row[0]) if row else None

    def remember(self, key: str, value: str) -> None:
        """Keep a value across restarts."""
        self._db.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (f"setting.{key}", value),
        )

    def remember_first(self, key: str, value: str) -> str:
        """Keep `value` unless a value is already kept (another agent may race us); return
        the kept one."""
        self._db.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
            (f"setting.{key}", value),
        )
        kept = self.get(key)
        assert kept is not None  # just written, or there before
        return kept
