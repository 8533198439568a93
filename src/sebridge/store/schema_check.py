"""Whether an opened store has the tables, columns and indexes its schema_version promises.

A store whose `meta` says it is up to date migrates nothing, so a table
dropped or altered by hand (or by a restore of half a backup) would only show
as a failing statement later, in the middle of a tick, and a dropped index as
a claim that slows with the backlog (or, for a unique one, an insert that
fails: `ON CONFLICT` needs it). Every open compares the store's tables,
columns and named indexes with what the schema builds (found by building it
on an empty in-memory SQLite database, so the list cannot drift from
schema.py) and refuses a store that lacks any, naming what is missing.
A command that only reads (`events`, `history`, `policy explain`) migrates
nothing: it refuses an older schema, saying which version and what moves it.
See docs/ARCHITECTURE.md, "Seams".
"""

from __future__ import annotations

from functools import cache

from sebridge.kernel.errors import StoreError
from sebridge.store.database import Database
from sebridge.store.schema import VERSION, refuse_unknown

__all__ = [
    "expected_columns",
    "expected_indexes",
    "open_schema",
    "require_current",
    "verify_schema",
]


def expected_columns() -> dict[str, frozenset[str]]:
    """Each table the schema builds, with its columns."""
    return _expected()[0]


def expected_indexes() -> dict[str, str]:
    """The indexes the schema creates, by name, with their table (CREATE INDEX; not
    the ones a primary key or UNIQUE column brings, which each dialect names its own way)."""
    return _expected()[1]


@cache
def _expected() -> tuple[dict[str, frozenset[str]], dict[str, str]]:
    from sebridge.store.sqlite import SqliteDatabase

    db = SqliteDatabase("sqlite://")
    try:
        db.migrate()
        return _columns(db), _indexes(db)
    finally:
        db.close()


def verify_schema(db: Database) -> None:
    """Raise StoreError naming every table, column or index the store lacks."""
    have = _columns(db)
    missing: list[str] = []
    for table, columns in sorted(expected_columns().items()):
        if table not in have:
            missing.append(f"table {table}")
            continue
        missing += [f"column {table}.{c}" for c in sorted(columns - have[table])]
    indexes = _indexes(db)
    missing += [
        f"index {name}"
        for name, table in sorted(expected_indexes().items())
        if name not in indexes and table in have  # a missing table is named itself
    ]
    if missing:
        raise StoreError(
            f"the store at {db.location} lacks {', '.join(missing)}, which its schema_version "
            "says it has: it was changed outside sebridge; restore it from a backup, or move "
            "it aside and let sebridge start a new one"
        )


def open_schema(db: Database, *, migrate: bool = True) -> None:
    """Migrate the schema (or, not `migrate`, require it current), then verify its tables."""
    if migrate:
        db.migrate()
    else:
        require_current(db)
    verify_schema(db)


def require_current(db: Database) -> None:
    """For a command that only reads (`events`, `history`): refuse a schema older than this
    sebridge's rather than write it, e.g. after an upgrade while the old daemon still runs
    (docs/ARCHITECTURE.md, "Seams")."""
    version, current = db.schema_version(), VERSION
    refuse_unknown(version, db.location)  # newer, or older than the baseline: nothing moves it
    if version < current:
        has = "has no tables yet" if version == 0 else f"has schema version {version}"
        raise StoreError(
            f"the store at {db.location} {has}, older than this sebridge's ({current}), and "
            "this command only reads: it changed nothing. `sebridge check`, or starting the "
            f"daemon (`sebridge run`), moves the store to version {current}"
        )


def _columns(db: Database) -> dict[str, frozenset[str]]:
    found: dict[str, set[str]] = {}
    for table, column in db.all(db.COLUMNS_SQL):
        if not str(table).startswith("sqlite_"):  # SQLite's own (AUTOINCREMENT's counters)
            found.setdefault(str(table), set()).add(str(column))
    return {table: frozenset(columns) for table, columns in found.items()}


def _indexes(db: Database) -> dict[str, str]:
    return {str(name): str(table) for name, table in db.all(db.INDEXES_SQL)}
