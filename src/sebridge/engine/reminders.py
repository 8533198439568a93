"""Reminders: an `ask` event nobody approved is announced again at each `remind` lead.

Once per lead, across restarts and across a fleet: a reminder is a transition
keyed by its lead (store/codec.py: transition_key), so whichever agent records
it first is the only one that delivers it. A lead that passed while sebridge
was down is said late, once, and only the latest one (the earlier would be
stale); one that had passed when the event was first seen is not said at all.
The tick asks `due()` at every poll: no store access until a lead comes, so
lateness stays within one poll interval. See docs/ARCHITECTURE.md,
"Reminders".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from sebridge.model import Transition, TransitionKind
from sebridge.model.decision import ASK
from sebridge.store import EventRecord, Store

__all__ = ["Reminders"]


class Reminders:
    """Records `reminder` transitions when their lead comes (the tick's thread only)."""

    def __init__(self, store: Store, sinks_for: Callable[[str], Sequence[str]]) -> None:
        self._store = store
        self._sinks_for = sinks_for
        self._said: set[tuple[str, int]] = set()
        # When the next lead comes; None: look at the store at the next tick (at start,
        # and whenever the document changed or an approval came).
        self._next: datetime | None = None
        self._stale = True

    def reschedule(self) -> None:
        """Events or approvals changed: look at the store again at the next tick."""
        self._stale = True

    def due(self, now: datetime) -> bool:
        """Whether a round may record something now (cheap: no store access)."""
        return self._stale or (self._next is not None and now >= self._next)

    def round(self, now: datetime) -> int:
        """Record every reminder whose lead has come; returns how many were new."""
        self._stale = False
        self._next = None
        recorded = 0
        for record in self._store.events():
            lead, upcoming = _leads(record, now)
            if upcoming is not None and (self._next is None or upcoming < self._next):
                self._next = upcoming
            if lead is None or (record.event.event_id, lead) in self._said:
                continue
            reminder = Transition(TransitionKind.REMINDER, record.event, now, remind_before=lead)
            sinks = self._sinks_for(record.policy)
            recorded += self._store.record_transition(reminder, sinks, now) is not None
            self._said.add((record.event.event_id, lead))
        return recorded


def _leads(record: EventRecord, now: datetime) -> tuple[int | None, datetime | None]:
    """The lead whose reminder is due now (the latest passed), and when the next comes."""
    event, decision = record.event, record.decision
    waiting = (
        decision.action == ASK
        and decision.remind
        and record.present
        and record.approval is None
        and not event.started
        and event.not_before is not None
    )
    if not waiting or event.not_before is None or now >= event.not_before:
        return None, None
    left = (event.not_before - now).total_seconds()
    # A lead already passed when the event was first seen is no reminder: the first
    # announcement said it (a 10-minute notice must not remind at 600 s a second later).
    notice = (event.not_before - record.first_seen).total_seconds()
    leads = [lead for lead in decision.remind if lead < notice]
    passed = [lead for lead in leads if lead >= left]
    coming = [lead for lead in leads if lead < left]
    upcoming = event.not_before - timedelta(seconds=max(coming)) if coming else None
    return (min(passed) if passed else None), upcoming
