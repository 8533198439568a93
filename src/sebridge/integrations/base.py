"""What an integration is: a name, whether the config turns it on, and what it brings.

An integration is one place sebridge talks to people (console, JSON lines,
Slack, ...). It lives in `integrations/<name>/` and may bring, each optional:

- settings: the frozen dataclass of its `[<name>]` config section (every
  field is a key; `config_reader` reads it), plus `validate()` for checks
  beyond types;
- a sink (outbound: one attempt per `send()`);
- inbound parts, once the daemon exists: HTTP routes on the daemon's one
  server, background services (Slack Socket Mode) and scheduler jobs;
- a doctor check for `sebridge check`.

The registry (`integrations/registry.py`) lists them in one tuple. The
module defining an Integration must stay cheap to import (config loading
reads every one): heavy client libraries are imported inside the methods.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TextIO, TypeVar, cast

if TYPE_CHECKING:
    from sebridge.approve import Approver
    from sebridge.config import Config
    from sebridge.config_reader import Reader
    from sebridge.render import Renderer
    from sebridge.sink import Sink
    from sebridge.store import Store
    from sebridge.store.duties import Duties, Duty

__all__ = [
    "Context",
    "Finding",
    "Host",
    "Inbound",
    "Integration",
    "Job",
    "Service",
    "SingleHolder",
    "StartResponse",
    "WsgiApp",
]

S = TypeVar("S")
StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


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
        self._duty: Duty | None = None
        self._lock = threading.Lock()

    def bind(self, duties: Duties) -> None:
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


@dataclass
class Inbound:
    """What an integration adds to a running daemon.

    Args:
        routes: path -> WSGI app on the daemon's HTTP server; a path ending in
            "/" serves everything below it.
    """

    routes: dict[str, WsgiApp] = field(default_factory=dict)
    services: list[Service] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)


class Host(Protocol):
    """What the daemon offers an integration's inbound side."""

    store: Store
    approver: Approver

    def vm_name(self) -> str:
        """This VM's name, as IMDS's Resources spell it."""
        ...

    def sinks_for(self, policy: str) -> Sequence[str]:
        """The sinks an event with this policy decision is delivered to."""
        ...

    def carry_out_approvals(self) -> None:
        """POST what was just approved now, not at the next tick."""
        ...


@dataclass(frozen=True)
class Context:
    """What building an integration's parts may use.

    Args:
        stdout: where console-like sinks write (None: sys.stdout at write time).
    """

    config: Config
    renderer: Renderer
    stdout: TextIO | None = None


@dataclass(frozen=True)
class Finding:
    """One result of `sebridge check`: ok, or a problem with what to do about it."""

    target: str  # the integration's name
    ok: bool
    message: str


class Integration(Generic[S]):
    """Base of every integration; a subclass overrides what it brings.

    Class attributes:
        name: the config section, the sink's name and the outbox key.
        title: how messages name it ("Slack").
        settings: the dataclass of its config section, or None for no section.
        outbound: whether `sink()` returns a sink (approval notices go to it).
    """

    name: ClassVar[str]
    title: ClassVar[str]
    settings: ClassVar[type[Any] | None] = None
    outbound: ClassVar[bool] = False  # sink() returns a sink

    def settings_of(self, config: Config) -> S:
        """This integration's section of the configuration."""
        return cast(S, config.section(self.name))

    def enabled(self, config: Config) -> bool:
        """Whether the configuration turns this integration on."""
        return False

    def validate(self, settings: S, config: Config, rd: Reader) -> S:
        """Checks beyond types (report to `rd`); returns the settings, normalised."""
        return settings

    def sink(self, ctx: Context) -> Sink | None:
        """The outbound sink, its templates tried now (a broken one raises ConfigError)."""
        return None

    def inbound(self, ctx: Context, host: Host, sink: Sink | None) -> Inbound:
        """Routes, services and jobs for a running daemon (`sebridge run`, not `once`)."""
        return Inbound()

    def check(self, ctx: Context) -> Sequence[Finding]:
        """Connectivity checks for `sebridge check`; never raises for a remote's answer."""
        return ()
