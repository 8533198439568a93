"""Reminders: an event nobody approved (`ask`), or whose approval is held, is announced
again at each lead of its rule: `remind` (seconds before NotBefore) and `remind_after`
(seconds after it was first announced; model/leads.py).

Once per lead, across restarts and across a fleet: a reminder is a transition
keyed by its lead (store/codec.py: transition_key), so whichever agent records
it first is the only one that delivers it. A lead that passed while sebridge
was down is said late, once, and only the latest one (the earlier would be
stale); one that had passed when the event was first seen, or when its approval
was held, is not said at all (that announcement said it). A lead the event's
notice can never reach was said in its first message (Transition.unreachable).

A round reads the events, records every lead that came, and says when the
next comes. The daemon runs rounds on a thread of their own, the kernel's
worker named `reminders`, asleep until the next lead or until woken by a write
to its tables (WAKES_ON: the document changed, or an approval's outcome was
recorded: held, reminded from now; kernel/subscriptions.py). `sebridge once`
and the tests run a round on theirs (run_once). What a round learnt (the next
lead, what was said) is kept only once the store answered: a StoreError leaves
it as it was, and the same lead is tried again (after the worker's back-off,
or at the next run_once). See docs/ARCHITECTURE.md, "Reminders".
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol

from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.errors import StoreError
from sebridge.kernel.worker import AT_ONCE, Worker
from sebridge.model import Transition, TransitionKind
from sebridge.model.approval import Blocker
from sebridge.model.decision import Decision
from sebridge.model.leads import REMIND, Lead, lead_due
from sebridge.model.records import EventRecord

__all__ = ["ReminderStore", "Reminders"]

log = logging.getLogger("sebridge.daemon")


class _EventReads(Protocol):
    def current(self) -> list[EventRecord]:
        """Events in the latest document."""
        ...


class _TransitionWrites(Protocol):
    def record(self, transition: Transition, sinks: Sequence[str], now: datetime) -> int | None:
        """Queue a transition once (None: recorded before)."""
        ...


class ReminderStore(Protocol):
    """What reminders read and write of the store (Store's repositories)."""

    @property
    def events(self) -> _EventReads: ...

    @property
    def transitions(self) -> _TransitionWrites: ...


class Reminders:
    """Records `reminder` transitions when their lead comes, on the `reminders` thread (or a
    round on the caller's: run_once).

    Args:
        sinks_for: the sinks an event's transitions go to, by its decision (its
            action and the rule's notify).
        on_recorded: called after a round that recorded a reminder (wakes the dispatcher).
        holding: whether an event's readiness would hold an approval now (hooks/agent.py:
            AgentHooks.holding): nobody approved it, yet its reminder says held.
    """

    def __init__(
        self,
        store: ReminderStore,
        sinks_for: Callable[[Decision], Sequence[str]],
        *,
        clock: Clock = utcnow,
        on_recorded: Callable[[], None] = lambda: None,
        holding: Callable[[EventRecord], bool] = lambda record: False,
    ) -> None:
        self._store = store
        self._holding = holding
        self._sinks_for = sinks_for
        self._clock = clock
        self._on_recorded = on_recorded
        self._said: set[tuple[str, Lead]] = set()
        # When the next round is due: at the next lead (None: none to come until woken).
        self._next: datetime | None = AT_ONCE
        self._worker = Worker(
            "reminders", self._look, expected=(StoreError,), logger=log, clock=clock
        )

    def start(self) -> None:
        """Run rounds on a thread of our own from now on (the daemon)."""
        self._worker.start()

    def stop(self, timeout: float = 0.0) -> bool:
        """Stop the thread, waiting up to `timeout` s for a round under way; True once ended."""
        return self._worker.stop(timeout)

    # Woken by these tables' writes (kernel/subscriptions.py): new events and ended ones
    # (their leads), an approval's outcome, recorded with its transition (held: reminded
    # from now; carried out: no more). Not a new approval: its carrier goes first.
    WAKES_ON = frozenset(("events", "transitions"))

    def wake(self) -> None:
        """Look at the store again, on our thread now."""
        self._worker.wake()

    def on_own_thread(self) -> bool:
        """Whether the caller is our thread (its own writes do not wake it)."""
        return self._worker.on_own_thread()

    @property
    def rounds(self) -> int:
        """How many rounds our thread finished, failed ones included."""
        return self._worker.rounds

    def run_once(self) -> int:
        """One round on the caller's thread, as of now (`sebridge once`, tests); how many
        reminders were new."""
        return self.record_due(self._clock())

    def record_due(self, now: datetime) -> int:
        """Record every reminder whose lead has come; returns how many were new. Raises
        StoreError, having changed nothing it would need to try again."""
        upcoming: datetime | None = None
        recorded = 0
        for record in self._store.events.current():
            since = record.reminded_since()
            leads = record.decision.leads
            lead, coming = lead_due(leads, record.event.not_before, record.first_seen, since, now)
            if coming is not None and (upcoming is None or coming < upcoming):
                upcoming = coming
            if lead is None or (record.event.event_id, lead) in self._said:
                continue
            reminder = Transition(
                TransitionKind.REMINDER,
                record.event,
                now,
                remind_before=lead.seconds if lead.key == REMIND else None,
                remind_after=None if lead.key == REMIND else lead.seconds,
                while_held=self._held(record),
            )
            sinks = self._sinks_for(record.decision)
            recorded += self._store.transitions.record(reminder, sinks, now) is not None
            self._said.add((record.event.event_id, lead))  # the store took it (or had it)
        self._next = upcoming
        if recorded:
            self._on_recorded()
        return recorded

    def _held(self, record: EventRecord) -> bool:
        """Its approval is held, or nobody approved it and one would only be held (a prepare
        hook failed at the prepare lead): the reminder says held, not "unanswered"."""
        blocker = record.blocker()
        return blocker == Blocker.HELD or (blocker is None and self._holding(record))

    def _look(self) -> datetime | None:
        """One round on our thread; the next lead is when the next is due."""
        self.record_due(self._clock())
        return self._next
