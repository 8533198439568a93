"""The daemon's unit of work: tick() = poll, record, approve, wake.

tick(): IMDS GET -> unchanged document? stop there (nothing parsed, nothing
written) -> diff against the previous document -> one store transaction
(events, transitions, outbox rows, the policy's approvals) -> wake the
carrier when approvals may wait -> wake the dispatcher. A failed poll is not
an empty document: no transition is ever invented from an IMDS outage.

The Daemon is given the parts (engine/parts.py, built by the composition root
cli/assembly.py) and uses those a tick drives (the hooks, the carrier, the
subscriptions that wake the others); engine/runner.py, given the same record,
owns their life (threads, scheduler, signals, stop). `sebridge once` and the tests call tick():
the poll, then each part's round once (Supervisor.run_once). See
docs/ARCHITECTURE.md, "Poll".
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from sebridge.engine.parts import Parts
from sebridge.engine.poll import Polled, PollState, TickResult
from sebridge.imds import ImdsClient
from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.errors import ImdsError
from sebridge.kernel.worker import Supervisor
from sebridge.model import Approval, Document, Transition, TransitionKind
from sebridge.model.decision import APPROVE, NO_MATCH, UNREADABLE, Decision
from sebridge.model.diff import diff
from sebridge.model.leads import unreachable
from sebridge.policy import Policy, decide
from sebridge.store import Store

__all__ = ["Daemon", "PollState", "Polled", "TickResult"]

log = logging.getLogger("sebridge.daemon")  # the name operators filter on, kept across moves


class Daemon:
    """Polls IMDS, records transitions, hands approvals to the carrier, feeds the dispatcher.

    Built by the composition root (cli/assembly.py: compose_daemon), which builds its
    parts too; the tick uses the hooks, the carrier and the subscriptions of them.

    Args:
        parts: the daemon's parts (engine/parts.py).
        vm_name: this VM's name as Resources list it (cli/runtime.py: vm_name).
        sinks_for: the sinks an event with a decision is delivered to (model/decision.py).
        policy: the rules that decide each new event (policy/compile.py: build_policy).
    """

    def __init__(
        self,
        imds: ImdsClient,
        store: Store,
        parts: Parts,
        *,
        vm_name: str,
        sinks_for: Callable[[Decision], tuple[str, ...]],
        policy: Policy,
        clock: Clock = utcnow,
    ) -> None:
        self.imds = imds
        self.store = store
        self.parts = parts
        self.metrics = parts.metrics
        self.policy = policy
        self._vm_name = vm_name
        self._sinks_for = sinks_for
        self.clock = clock
        # What the integrations' inbound side and the pages are offered (integrations/base.py:
        # Host): the approval use case, and what hooks' output must not show.
        self.approvals = parts.approvals
        self.hook_mask = parts.hook_mask
        self.hooks = parts.hooks
        self.carrier = parts.carrier
        self.subscriptions = parts.subscriptions
        # The parts woken by events whose rounds a tick runs (the runner runs them on their
        # threads): last started first, the hooks an approval waits for, then the carrier,
        # then the reminders.
        self.rounds = Supervisor(
            [
                ("reminders", parts.reminders),
                ("carrier", parts.carrier),
                ("hooks", parts.hook_worker),
            ]
        )
        self._acted = False  # the first act wakes the carrier (see act)
        self._previous: Document | None = store.documents.last()
        self._last_object: Document | None = None
        self._imds_failing: str | None = None
        self.poll_state = PollState()
        self._write_marker = store.write_marker()
        # Changes of the write marker: counted by quiet() on the poll thread (the
        # marker's only reader there), acted on by act() on the recorder's, each poll
        # carrying the count it saw (a poll the recorder skips loses no write).
        self._writes_seen = 0
        self._writes_acted = 0
        # Whether the store tells us of writes as they are committed (watch_store);
        # else each tick compares its write marker.
        self._store_pushes = False

    def vm_name(self) -> str:
        """This VM's name, as IMDS's Resources spell it."""
        return self._vm_name

    def _tags_of(self) -> dict[str, dict[str, str]]:
        """Every VM's recorded Azure tags, for a rule's `tags` (store/vm_tags.py)."""
        return self.store.vm_tags.all()

    def sinks_for(self, decision: Decision) -> tuple[str, ...]:
        """The sinks an event with this decision is delivered to (model/decision.py)."""
        return self._sinks_for(decision)

    def tick(self) -> TickResult:
        """One poll end to end on the caller's thread (`sebridge once`, tests): poll,
        record, then each part's round once (the hooks, the carrier, the reminders); the
        rows it queued wait for the dispatcher."""
        result = self.act(self.poll())
        settled = self.carrier.settled
        self.rounds.run_once()
        result.approvals_done = self.carrier.settled - settled
        return result

    def poll(self) -> Polled:
        """A tick's first half: the IMDS GET, and nothing that waits on the store."""
        result = TickResult()
        document = self._poll(result)
        # One clock reading a poll: when IMDS answered, the time act() and quiet() use.
        at = self.clock()
        if document is not None:
            self.poll_state = PollState(at)
        return Polled(document, at, result)

    def quiet(self, polled: Polled) -> bool:
        """Between poll() and act(), on the poll thread: True when the poll needs no
        act() (the daemon then does not wake the recorder for it) and was counted here.

        Quiet is the same document object as the one last acted on (the client returns
        the very object for an unchanged body) and no other process's write to the store
        since the last look (the parts keep their own timers). What the recorder's thread
        sets may be read stale here: each stale value says "not quiet", never the
        reverse. Counts the write marker's changes into `polled`, so
        act() does not read the marker from another thread. See docs/ARCHITECTURE.md, "Poll".
        """
        if not self._store_pushes and self._store_written():
            self._writes_seen += 1
        polled.writes = self._writes_seen
        document = polled.document
        if (
            document is None
            or document is not self._last_object
            or self._writes_seen != self._writes_acted
        ):
            return False
        self.metrics.quiet_poll(polled.at)
        return True

    def act(self, polled: Polled) -> TickResult:
        """A tick's second half, for what poll() found: record it, wake who acts on it
        (may wait on the store: the daemon runs it on the recorder's thread, engine/record.py)."""
        result, document = polled.result, polled.document
        # Writes since the last tick (another process's `sebridge approve` on a SQLite
        # file shows as one); looked at before this tick's own write, which the next sees.
        if polled.writes is None:  # nobody looked after the poll (`once`, tests)
            written = not self._store_pushes and self._store_written()
        else:
            written = polled.writes != self._writes_acted
            self._writes_acted = polled.writes
        changed = (
            document is not None
            and document is not self._last_object
            and document != self._previous
        )
        self.metrics.polled(
            "error" if document is None else "changed" if changed else "unchanged",
            self.poll_state.last_ok if document is not None else None,
        )
        if document is not None and document is not self._last_object:
            if changed:
                self._record(document, result, polled.at)
            # Only once recorded: after a store failure the same document is tried again.
            self._last_object = document
        # What this tick wrote woke its parts as it committed (kernel/subscriptions.py).
        # Another process's write seen only as a changed file (SQLite: what it wrote is
        # unknown) wakes every part. The carrier's first round waits for the first tick
        # (until then the store's document is the one from before a restart); the other
        # parts' first rounds ran at their start.
        if written:
            self.subscriptions.publish_all()
        if not self._acted:
            self._acted = True
            self.carrier.wake()
        return result

    def take_back_claims(self) -> None:
        """Put back what this agent had claimed when its process ended (deliveries, and
        approvals a crash cut short mid-POST: sent again now, not after their lease). Only
        a process that holds the store as this agent does this (`run`, `once`), never a CLI
        beside the daemon."""
        self.store.outbox.release_own_claims()
        self.store.approvals.release_own()

    def watch_store(self) -> None:
        """Act on other processes' writes as they are committed (PostgreSQL: an approval
        stored by another agent is carried out at once), not at the next poll."""
        self._store_pushes = self.store.watch(self.subscriptions.publish)

    def heard(self, tables: frozenset[str]) -> None:
        """Commits to `tables` were heard (the store listener's thread): wake their parts."""
        self.subscriptions.publish(tables)

    def look_again(self) -> None:
        """Work may wait that no NOTIFY announced (the heartbeat says so)."""
        self.subscriptions.publish_all()

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
        return document

    def _record(self, document: Document, result: TickResult, now: datetime) -> None:
        """Write the document's transitions as of `now`, when it was read."""
        approved = self.store.approvals.approved_ids() if self._previous else frozenset()
        transitions = self._with_alarms(diff(self._previous, document, now, approved))
        # Decided once, when an event is first seen (by this agent: in a fleet the first
        # agent's decision is the one the store keeps).
        # An event IMDS lists that we cannot read is told to every sink, never approved.
        decisions: dict[str, Decision] = {
            u.stand_in.event_id: UNREADABLE for u in document.unreadable
        }
        approvals: list[Approval] = []
        for n, t in enumerate(transitions):
            if t.kind in (TransitionKind.SCHEDULED, TransitionKind.UNPLANNED):
                decision = decide(t.event, self.policy, self.vm_name(), now, self._tags_of)
                decisions[t.event_id] = decision
                # A reminder lead its notice can never reach is said once: in its first
                # message (model/leads.py; the store keeps `now` as its first sight).
                missed = unreachable(decision.leads, t.event.not_before, now)
                if missed and t.kind == TransitionKind.SCHEDULED:
                    transitions[n] = replace(t, unreachable=missed)
                # decide() never approves a started event (nothing to approve).
                if decision.action == APPROVE:
                    approvals.append(Approval(t.event_id, "policy", "policy", now))
        deliveries = [
            (t, self.sinks_for(self._decision(t.event_id, decisions))) for t in transitions
        ]
        recorded = self.store.documents.apply(
            document, deliveries, now, decisions=decisions, approvals=approvals
        )
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

    def _with_alarms(self, transitions: list[Transition]) -> list[Transition]:
        """Each event that started with unready VMs gets its alarm right after its start."""
        out: list[Transition] = []
        for t in transitions:
            out.append(t)
            alarm = self.hooks.started_unready(t) if t.kind == TransitionKind.STARTED else None
            out += [alarm] if alarm is not None else []
        return out

    def _decision(self, event_id: str, fresh: dict[str, Decision]) -> Decision:
        if event_id in fresh:
            return fresh[event_id]
        record = self.store.events.get(event_id)
        return record.decision if record else NO_MATCH

    def _store_written(self) -> bool:
        """Whether anyone (this process included) wrote to the store since the last tick."""
        marker = self.store.write_marker()
        changed = marker != self._write_marker
        self._write_marker = marker
        return changed
