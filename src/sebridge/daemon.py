"""The daemon: tick() is the unit of work; run() calls it on an APScheduler interval (runner.py).

tick(): IMDS GET -> unchanged document? stop there (nothing parsed, nothing
written) -> diff against the previous document -> one store transaction
(events, transitions, outbox rows, the policy's approvals) -> carry out
pending approvals -> wake the dispatcher. A failed poll is not an empty
document: no transition is ever invented from an IMDS outage.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sebridge.approve import Approver
from sebridge.diff import diff
from sebridge.dispatch import Dispatcher
from sebridge.errors import ImdsError, StoreError
from sebridge.imds import ImdsClient
from sebridge.integrations.base import Job, Service
from sebridge.model import Approval, Document, ScheduledEvent, Transition, TransitionKind
from sebridge.policy import APPROVE, IGNORE, PolicySettings, decide
from sebridge.sink import Sink
from sebridge.store import Store
from sebridge.store.duties import Duties
from sebridge.store.store import HEARTBEAT

__all__ = ["Daemon", "PollState", "TickResult"]

log = logging.getLogger(__name__)


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class PollState:
    """The last good poll and, while IMDS fails, why (for /healthz)."""

    last_ok: datetime | None = None
    error: str | None = None


@dataclass
class TickResult:
    """What one tick did (for `sebridge once`, tests and logs)."""

    polled: bool = False
    changed: bool = False
    transitions: list[Transition] = field(default_factory=list)
    approvals_done: int = 0
    error: str | None = None


class Daemon:
    """Polls IMDS, records transitions, carries out approvals, feeds the dispatcher.

    Args:
        vm_name: this VM's name; empty: asked from IMDS (compute name) on the first tick.
        approve_url: an event's signed approval link, for messages (None: links are off).
    """

    def __init__(
        self,
        imds: ImdsClient,
        store: Store,
        sinks: Sequence[Sink],
        *,
        policy: PolicySettings | None = None,
        dry_run: bool = False,
        vm_name: str = "",
        retry_for: timedelta = timedelta(hours=1),
        max_backoff: float = 300.0,
        clock: Callable[[], datetime] = _utcnow,
        approve_url: Callable[[ScheduledEvent], str] | None = None,
    ) -> None:
        self.imds = imds
        self.store = store
        self.sinks = list(sinks)
        self._sink_names = [s.name for s in self.sinks]
        self._policy = policy or PolicySettings()
        self._dry_run = dry_run
        # Configured, else learnt from IMDS on an earlier run (so deliveries made
        # before this run's first poll already name this VM), else asked on the
        # first tick.
        self._vm_name = vm_name or store.setting("vm_name") or ""
        self._vm_name_checked = bool(vm_name)
        self._vm_name_warned = False
        self.clock = clock
        self.approver = Approver(store, imds, self.sinks_for, dry_run=dry_run, clock=clock)
        self.dispatcher = Dispatcher(
            store,
            self.sinks,
            vm_name=self.vm_name,
            dry_run=dry_run,
            retry_for=retry_for,
            max_backoff=max_backoff,
            clock=clock,
            approve_url=approve_url,
        )
        self._previous: Document | None = store.last_document()
        self._last_object: Document | None = None
        self._imds_failing: str | None = None
        self.poll_state = PollState()
        self._write_marker = store.db.write_marker()
        # Whether approvals may be waiting: set by the policy, by writes from
        # other processes (`sebridge approve`) and by failed POSTs; checking the
        # table only then keeps an idle tick cheap.
        self._approvals_due = True
        # Whether the store tells us of writes as they are committed (watch_store);
        # else each tick compares its write marker.
        self._store_pushes = False
        # Run beside the polling by run(): the HTTP server, Slack's Socket Mode,
        # integrations' scheduler jobs.
        self.services: list[Service] = []
        self.jobs: list[Job] = []
        self.duties: Duties | None = None  # the board, while run() runs
        self.store_error: str | None = None  # why the last tick could not use the store

    def vm_name(self) -> str:
        """This VM's name, as IMDS's Resources spell it."""
        return self._vm_name or socket.gethostname()

    def sinks_for(self, policy: str) -> Sequence[str]:
        """Ignored events go nowhere; every other one to every sink."""
        return [] if policy == IGNORE else self._sink_names

    def tick(self) -> TickResult:
        """One poll, end to end."""
        result = TickResult()
        document = self._poll(result)
        if document is not None and document is not self._last_object:
            if document != self._previous:
                self._record(document, result)
            # Only once recorded: after a store failure the same document is tried again.
            self._last_object = document
        written = not self._store_pushes and self._store_written()
        if written or self._approvals_due:
            self._approvals_due = False
            result.approvals_done = self.approver.execute()
            self._approvals_due = self.store.has_pending_approvals()
        if result.changed or result.approvals_done or written:
            self.dispatcher.wake()
        return result

    def carry_out_approvals(self) -> None:
        """POST what was just approved now, not at the next tick, and deliver its news."""
        self.approver.execute()
        if self.store.has_pending_approvals():
            self._approvals_due = True  # the POST failed: the next tick retries it
        self.dispatcher.wake()

    def watch_store(self) -> None:
        """Act on other processes' writes as they are committed (PostgreSQL: an approval
        stored by another agent is POSTed at once), not at the next poll."""
        self._store_pushes = self.store.db.watch(self._heard_write)

    def look_again(self) -> None:
        """Work may wait that no NOTIFY announced (the heartbeat says so): the next tick
        looks for approvals, the dispatcher looks at the outbox now."""
        self._approvals_due = True
        self.dispatcher.wake()

    def _heard_write(self, tables: frozenset[str]) -> None:
        if "approvals" not in tables:
            self.dispatcher.wake()
            return
        try:
            self.carry_out_approvals()  # wakes the dispatcher too
        except StoreError as exc:  # the tick says the store is away; it retries then
            log.debug("approvals heard of, not carried out yet: %s", exc)
            self._approvals_due = True

    def _poll(self, result: TickResult) -> Document | None:
        try:
            document = self.imds.get_document()
        except ImdsError as exc:
            result.error = self.poll_state.error = str(exc)
            if self._imds_failing != type(exc).__name__:
                log.warning("IMDS poll failed: %s (events kept as they were)", exc)
            self._imds_failing = type(exc).__name__
            return None
        if self._imds_failing:
            log.info("IMDS answers again")
            self._imds_failing = None
        result.polled = True
        self.poll_state = PollState(self.clock())
        if not self._vm_name_checked:
            self._learn_vm_name()
        return document

    def _learn_vm_name(self) -> None:
        try:
            name = self.imds.instance_name()
        except ImdsError as exc:
            # Asked again after the next good poll; said once.
            if not self._vm_name_warned:
                log.warning(
                    "cannot read this VM's name from IMDS (%s); using %s", exc, self.vm_name()
                )
                self._vm_name_warned = True
            return
        self._vm_name_checked = True
        if name != self._vm_name:
            self.store.remember("vm_name", name)
            self._vm_name = name

    def _record(self, document: Document, result: TickResult) -> None:
        now = self.clock()
        approved = self.store.approved_ids() if self._previous else frozenset()
        transitions = diff(self._previous, document, now, approved)
        policies: dict[str, str] = {}
        approvals: list[Approval] = []
        for t in transitions:
            if t.kind in (TransitionKind.SCHEDULED, TransitionKind.UNPLANNED):
                decision = decide(t.event, self._policy, self.vm_name())
                policies[t.event_id] = decision
                if decision == APPROVE:
                    approvals.append(Approval(t.event_id, "policy", "policy", now))
        deliveries = [
            (t, self.sinks_for(self._policy_of(t.event_id, policies))) for t in transitions
        ]
        recorded = self.store.apply(
            document, deliveries, now, policies=policies, approvals=approvals
        )
        self._approvals_due = self._approvals_due or bool(approvals)
        self._previous = document
        result.changed = True
        result.transitions = transitions
        for t in transitions:
            # In a fleet every agent derives it; the log says it once, where it was recorded.
            first = any(r is t for r in recorded)
            log.log(
                logging.INFO if first else logging.DEBUG,
                "%s %s %s%s",
                t.kind,
                t.event.event_type,
                t.event_id,
                "" if first else " (recorded by another agent)",
            )

    def _policy_of(self, event_id: str, fresh: dict[str, str]) -> str:
        if event_id in fresh:
            return fresh[event_id]
        record = self.store.event(event_id)
        return record.policy if record else "notify"

    def _store_written(self) -> bool:
        """Whether anyone (this process included) wrote to the store since the last tick."""
        marker = self.store.db.write_marker()
        changed = marker != self._write_marker
        self._write_marker = marker
        return changed

    def run(
        self,
        poll_interval: float = 1.0,
        *,
        stop: threading.Event | None = None,
        shutdown_grace: float = 5.0,
        retention: timedelta = timedelta(days=90),
        heartbeat: timedelta = HEARTBEAT,
    ) -> int:
        """Poll until SIGTERM/SIGINT (or `stop` is set); returns the exit code, 0.
        See runner.py: the scheduler, the duties and the bounded stop."""
        from sebridge.runner import DaemonRunner

        return DaemonRunner(self).run(
            poll_interval,
            stop=stop,
            shutdown_grace=shutdown_grace,
            retention=retention,
            heartbeat=heartbeat,
        )
