"""What runs beside the polling: services with a start and a stop, and scheduler jobs.

Integrations bring them (Slack's Socket Mode connection, the Jira status
search); the runner (engine/runner.py) starts, schedules and stops them. A
single-holder service or job is run by at most `slots` agents of a fleet at
once (store/duties.py); on a store one daemon uses (SQLite), it simply runs.
In the model, so an integration gives the runtime its parts without importing
it; the board is the Protocol below, which the store's duties satisfy.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["DutyBoard", "HeldDuty", "Job", "Service", "SingleHolder"]


class Service(Protocol):
    """Something that runs beside the polling (Slack's Socket Mode connection)."""

    def start(self) -> None:
        """Start in the background; raise if that is impossible."""
        ...

    def stop(self) -> None:
        """Stop, ending every thread it started."""
        ...


@dataclass(frozen=True)
class Job:
    """A function the daemon's scheduler runs every `interval` seconds (never two at once).

    single_holder: one agent of a fleet runs it (the holder of the duty named
    after the job); the others skip their turns until they take the duty over.
    """

    name: str
    interval: float
    run: Callable[[], None]
    single_holder: bool = False


class HeldDuty(Protocol):
    """One duty of the fleet's board (store/duties.py: Duty), as a single holder follows it."""

    def held(self) -> bool:
        """Whether this agent holds it now."""
        ...

    def on_change(self, callback: Callable[[bool], None]) -> None:
        """Call `callback(held)` whenever this agent takes the duty or loses it."""
        ...


class DutyBoard(Protocol):
    """The daemon's board of duties (store/duties.py: Duties), as a single holder binds to it."""

    def duty(self, name: str, slots: int = 1) -> HeldDuty:
        """The duty `name`, at most `slots` holders at once."""
        ...


class SingleHolder:
    """A service at most `slots` agents of a fleet run at once; the others stand by
    and build a fresh one with `make` when they take the duty over (its holder died).
    On a store one daemon uses (SQLite), it simply runs."""

    def __init__(self, name: str, slots: int, make: Callable[[], Service]) -> None:
        self.name = name
        self.slots = slots
        self._make = make
        self._running: Service | None = None
        self._started = False
        self._duty: HeldDuty | None = None
        self._lock = threading.Lock()

    def bind(self, duties: DutyBoard) -> None:
        """Follow the duty on the daemon's board (before start())."""
        self._duty = duties.duty(self.name, self.slots)
        self._duty.on_change(self._changed)

    def running(self) -> bool:
        """Whether this agent runs the service now."""
        return self._running is not None

    def start(self) -> None:
        """Run it as soon as (and for as long as) the duty is held."""
        self._started = True
        self._changed(self._duty is not None and self._duty.held())

    def stop(self) -> None:
        """Stop it (idempotent); the duty is let go by the daemon."""
        self._started = False
        self._changed(False)

    def _changed(self, held: bool) -> None:
        with self._lock:
            if held and self._started and self._running is None:
                service = self._make()
                service.start()
                self._running = service
            elif not (held and self._started) and self._running is not None:
                service, self._running = self._running, None
                service.stop()
