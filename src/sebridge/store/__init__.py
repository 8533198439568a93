"""The durable store: SQLite (WAL) by default or PostgreSQL, with the outbox. Only it runs SQL.

The records it returns are read models of the model (model/records.py)."""

from sebridge.store.store import Store

__all__ = ["Store"]
