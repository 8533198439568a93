"""The simulated world: events, approvals and records, evaluated lazily from a clock.

Nothing runs in the background: every read computes each event's phase from
the clock, so a test driving a fake clock sees exactly the document it
expects. Evaluating also notices lifecycle changes (for the log) and keeps
DocumentIncarnation in step with the events array.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

from sebridge.imds.simulator.document import (
    API_VERSIONS,
    NEWEST,
    IncarnationCounter,
    render_events,
    shown_in,
)
from sebridge.imds.simulator.events import (
    Phase,
    SimEvent,
    check_terminate_notice,
    default_active,
    default_description,
    default_notice,
    new_event_id,
    rfc1123,
)
from sebridge.imds.simulator.records import Recorder
from sebridge.imds.simulator.spec import EventSpec, check_notice

__all__ = ["SimulatorState"]

Current = list[tuple[SimEvent, Phase]]


class SimulatorState:
    """Events and records behind one lock. Durations in, instants out, scaled by time_scale."""

    def __init__(
        self,
        *,
        vm_name: str,
        time_scale: float,
        terminate_notice: float,
        approval_delay: float,
        clock: Callable[[], float],
        log: Callable[[str], None] | None = None,
    ) -> None:
        """Create an empty world (incarnation 1, no events); raises ValueError on bad settings."""
        if not vm_name:
            raise ValueError("vm_name must not be empty")
        if not time_scale > 0:
            raise ValueError(f"time_scale must be positive, got {time_scale!r}")
        if approval_delay < 0:
            raise ValueError(f"approval_delay must not be negative, got {approval_delay!r}")
        self.vm_name = vm_name
        self.tags: dict[str, str] = {}  # the VM's Azure tags (instance metadata)
        self.time_scale = float(time_scale)
        self.terminate_notice = check_terminate_notice(terminate_notice)
        self.approval_delay = float(approval_delay)
        self.clock = clock
        self._log = log
        self._lock = threading.Lock()
        self._events: dict[str, SimEvent] = {}
        self._observed: dict[str, Phase] = {}
        self._incarnation = IncarnationCounter()
        self.records = Recorder()

    # -- changing the world -------------------------------------------------

    def schedule(self, spec: EventSpec, base: float | None = None) -> str:
        """Create an event from a validated spec; returns its EventId.

        Args:
            base: the instant `spec.at` counts from (default now), so a
                scenario's events share one starting point.
        """
        scale = self.time_scale
        unplanned = spec.status == "Started"
        notice = spec.notice
        if notice is None:
            notice = 0.0 if unplanned else default_notice(spec.event_type, self.terminate_notice)
        elif not unplanned:
            try:
                check_notice(spec.event_type, notice, self.terminate_notice)
            except ValueError as exc:
                raise ValueError(f"notice: {exc}") from None
        active = (
            spec.active
            if spec.active is not None
            else default_active(spec.event_type, spec.duration)
        )
        with self._lock:
            event_id = spec.event_id or new_event_id()
            if self._lookup(event_id) is not None:
                raise ValueError(f"id: an event with id {event_id} already exists")
            appears = (self.clock() if base is None else base) + spec.at / scale
            # NotBefore is shown in whole seconds; rounding up keeps the start at
            # or after the time the client was shown ("guaranteed not before").
            not_before = None if unplanned else float(math.ceil(appears + notice / scale))
            self._events[event_id] = SimEvent(
                event_id=event_id,
                event_type=spec.event_type,
                source=spec.source,
                resources=spec.resources or (self.vm_name,),
                description=spec.description
                or default_description(spec.event_type, spec.source, unplanned),
                duration=spec.duration,
                appears_at=appears,
                not_before=not_before,
                active_for=active / scale,
                notice=notice,
                active=active,
            )
            self._observed[event_id] = Phase.PENDING
        self.refresh()
        return event_id

    def start_event(self, event_id: str) -> None:
        """Start an event now, as the platform might (KeyError for an unknown id)."""
        with self._lock:
            event = self._find(event_id)
            now = self.clock()
            event.appears_at = min(event.appears_at, now)
            if event.forced_start_at is None:
                event.forced_start_at = now
        self.refresh()

    def complete(self, event_id: str) -> None:
        """Remove an event from the document now (KeyError for an unknown id)."""
        with self._lock:
            event = self._find(event_id)
            now = self.clock()
            if event.removed_at is None or event.removed_at > now:
                event.removed_at = now
        self.refresh()

    def approve(self, ids: list[str], version: str) -> str | None:
        """Apply the StartRequests of a valid POST; returns an error message, or None if accepted.

        Every id must be an event in the document this api-version sees; then
        each approval is recorded, and a first approval starts the event after
        approval_delay (scaled). Approving again is accepted and changes nothing.
        """
        lines: list[str] = []
        with self._lock:
            now = self.clock()
            visible = {
                event.event_id.upper(): event
                for event, phase in self._evaluate(now, lines)
                if phase.visible and shown_in(event.event_type, version)
            }
            # GUIDs compare case-insensitively; the docs' samples post lowercase ids.
            unknown = [event_id for event_id in ids if event_id.upper() not in visible]
            if not unknown:
                for event_id in ids:
                    event = visible[event_id.upper()]
                    self.records.add_start_request(event.event_id)
                    if event.approved_at is None:
                        event.approved_at = now
                        event.approval_starts_at = now + self.approval_delay / self.time_scale
                        lines.append(f"{event.event_type} {event.event_id} approved (StartRequest)")
        self._emit(lines)
        if unknown:
            return f"Bad request. EventId {unknown[0]} is not a current scheduled event"
        return None

    # -- reading it ----------------------------------------------------------

    def refresh(self) -> None:
        """Evaluate the world now: log lifecycle changes and update the incarnation."""
        lines: list[str] = []
        with self._lock:
            self._evaluate(self.clock(), lines)
        self._emit(lines)

    def document(self, version: str) -> dict[str, Any]:
        """The scheduled events document an api-version would get now."""
        if version not in API_VERSIONS:
            raise ValueError(f"unknown api-version {version!r}")
        lines: list[str] = []
        with self._lock:
            current = self._evaluate(self.clock(), lines)
            document = {
                "DocumentIncarnation": self._incarnation.value,
                "Events": render_events(current, version),
            }
        self._emit(lines)
        return document

    @property
    def incarnation(self) -> int:
        """The current DocumentIncarnation."""
        lines: list[str] = []
        with self._lock:
            self._evaluate(self.clock(), lines)
            value = self._incarnation.value
        self._emit(lines)
        return value

    def view(self, event_id: str) -> dict[str, object]:
        """One event as the control API shows it (KeyError for an unknown id)."""
        with self._lock:
            return self._find(event_id).view(self.clock())

    def snapshot(self) -> dict[str, Any]:
        """Everything the control API's GET /simulator/state reports."""
        lines: list[str] = []
        with self._lock:
            now = self.clock()
            self._evaluate(now, lines)
            snapshot = {
                "incarnation": self._incarnation.value,
                "vm_name": self.vm_name,
                "time_scale": self.time_scale,
                "events": [event.view(now) for event in self._events.values()],
            }
        self._emit(lines)
        return snapshot | self.records.as_json()

    def note(self, line: str) -> None:
        """Send one line to the log callback (faults served, rate limiting)."""
        self._emit([line])

    # -- internals -------------------------------------------------------------

    def _lookup(self, event_id: str) -> SimEvent | None:
        """The event with this id, compared case-insensitively like a GUID. Lock held."""
        wanted = event_id.upper()
        return next((e for e in self._events.values() if e.event_id.upper() == wanted), None)

    def _find(self, event_id: str) -> SimEvent:
        event = self._lookup(event_id)
        if event is None:
            raise KeyError(event_id)
        return event

    def _evaluate(self, now: float, lines: list[str]) -> Current:
        """Phases at `now`; appends lifecycle lines and updates the incarnation. Lock held."""
        current = [(event, event.phase(now)) for event in self._events.values()]
        for event, phase in current:
            before = self._observed.get(event.event_id, Phase.PENDING)
            if phase is not before:
                lines.extend(_transition_lines(event, before, phase))
                self._observed[event.event_id] = phase
        self._incarnation.observe(render_events(current, NEWEST))
        return current

    def _emit(self, lines: list[str]) -> None:
        # Called without the lock, so a slow log sink never blocks requests.
        if self._log is not None:
            for line in lines:
                self._log(line)


def _transition_lines(event: SimEvent, before: Phase, after: Phase) -> list[str]:
    """Log lines for every step from `before` to `after`, including steps nobody polled."""
    path = [] if event.unplanned else [Phase.SCHEDULED]
    path += [Phase.CANCELLED] if after is Phase.CANCELLED else [Phase.STARTED, Phase.COMPLETED]
    name = f"{event.event_type} {event.event_id}"
    lines = []
    for step in path:
        if not before.rank < step.rank <= after.rank:
            continue
        if step is Phase.SCHEDULED and event.not_before is not None:
            lines.append(
                f"{name} scheduled ({event.source}), NotBefore {rfc1123(event.not_before)}"
            )
        elif step is Phase.STARTED:
            lines.append(f"{name} started" + (" (unplanned)" if event.unplanned else ""))
        else:
            lines.append(f"{name} {step.value.lower()}")
    return lines
