"""The durable store: SQLite by default (WAL), with the outbox. Only this package runs SQL."""

from sebridge.store.records import (
    ApprovalRecord,
    AuditEntry,
    Delivery,
    DeliveryStatus,
    EventRecord,
    HistoryEntry,
)
from sebridge.store.store import Store

__all__ = [
    "ApprovalRecord",
    "AuditEntry",
    "Delivery",
    "DeliveryStatus",
    "EventRecord",
    "HistoryEntry",
    "Store",
]
