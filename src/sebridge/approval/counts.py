"""What the approval use case and the carrier count, as they see it: two calls.

engine/metrics.py's `Metrics` is what the daemon hands in; the approval layer
sits below the engine and names only what it calls, so it never imports the
metrics (or prometheus_client).
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["NOT_COUNTED", "ApprovalCounts"]


class ApprovalCounts(Protocol):
    """Counts approvals by channel and outcome (engine/metrics.py's Metrics)."""

    def approval_settled(self, via: str, outcome: str) -> None:
        """A request came to `outcome` (OutcomeKind's values) without the carrier."""
        ...

    def approval_ended(self, via: str, state: str) -> None:
        """The carrier recorded an approval's state (ApprovalState's values)."""
        ...


class _NotCounted:
    """For callers with no metrics (`sebridge once`, `approve`, tests): counts nothing."""

    def approval_settled(self, via: str, outcome: str) -> None:
        pass

    def approval_ended(self, via: str, state: str) -> None:
        pass


NOT_COUNTED: ApprovalCounts = _NotCounted()
