"""The durable store: SQLite (WAL) by default or PostgreSQL, with the outbox. Only it runs SQL."""

from sebridge.model.records import (
    ApprovalRecord,
    AuditEntry,
    Delivery,
    DeliveryStatus,
    EventRecord,
    HistoryEntry,
    HookRunRecord,
)
from sebridge.store.store import Store

__all__ = [
    "ApprovalRecord",
    "AuditEntry",
    "Delivery",
    "DeliveryStatus",
    "EventRecord",
    "HistoryEntry",
    "HookRunRecord",
    "Store",
]
