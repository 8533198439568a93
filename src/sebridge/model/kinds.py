"""Which kinds of transition a channel delivers: the defaults an integration declares, and
what an instance's `transitions` narrows them to.

A chat, a console, a log hears every step (threaded, or one line each): every kind but
READY, which folds the hook steps it already has. A mail box or a Teams channel hears what
a person acts on: the first message, holds, reminders, approvals, alarms, the hook steps
folded into one readiness message, and the end. The outbox writes no row for a kind an
instance does not want (store/outbox.py). See docs/ARCHITECTURE.md, "Integrations".
"""

from __future__ import annotations

from sebridge.model import TransitionKind as K

__all__ = ["EVERY_STEP", "FOLDED"]

EVERY_STEP: frozenset[str] = frozenset(k.value for k in K if k != K.READY)
FOLDED: frozenset[str] = frozenset(
    {
        K.SCHEDULED,  # the first message
        K.UNPLANNED,
        K.HELD,  # holds
        K.REMINDER,
        K.APPROVED,  # approvals
        K.WOULD_APPROVE,
        K.PROBLEM,  # alarms
        K.STARTED_UNREADY,
        K.READY,  # the hook steps, folded
        K.COMPLETED,  # the end
        K.CANCELLED,
    }
)
