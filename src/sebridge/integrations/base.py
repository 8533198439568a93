"""What an integration is, and the narrow things the core hands it.

An integration is one place sebridge talks to people (console, JSON lines,
Slack, ...). It lives in `integrations/<name>/` and may bring, each optional:

- settings: the frozen dataclass of its `[<name>]` config section (every
  field is a key; config/reader.py reads it), plus `validate()` for checks
  beyond types;
- a sink (outbound: one attempt per `send()`), delivered under its
  instance's name: `[slack]` is the instance "slack", `[slack.dba]` the
  instance "slack.dba", and that name is the config section and the outbox
  key at once, by construction (a sink has no name of its own);
- inbound parts, once the daemon exists: HTTP routes on the daemon's one
  server, background services (Slack Socket Mode) and scheduler jobs;
- a doctor check for `sebridge check`, and a test message for `sebridge
  check --send-test`.

It gets only what it uses: its own settings, two facts about the core
(`Core`), the templates, and, inbound, a `Host` whose approvals desk is the
one approval use case every channel calls. The registry
(`integrations/registry.py`) lists the integrations and is the only module
that knows them all. See docs/ARCHITECTURE.md, "Integrations".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TextIO, TypeVar, cast

from sebridge.model.kinds import EVERY_STEP
from sebridge.model.services import Job, Service

if TYPE_CHECKING:
    from sebridge.config.reader import Reader
    from sebridge.integrations.render import Renderer
    from sebridge.kernel.wsgi import WsgiApp
    from sebridge.model.approval_request import ApprovalRequest, Outcome
    from sebridge.model.message import Sink
    from sebridge.model.records import EventRecord

__all__ = [
    "Context",
    "Core",
    "Desk",
    "Finding",
    "Host",
    "Inbound",
    "Integration",
    "TrialNote",
    "tried",
]

S = TypeVar("S")


@dataclass(frozen=True)
class Core:
    """What an integration may know of the core's configuration.

    Args:
        dry_run: policy.dry_run: approvals are announced, never sent to IMDS.
        links: approval links are on (`[http] public_url` is set).
    """

    dry_run: bool = False
    links: bool = False


@dataclass(frozen=True)
class Context(Generic[S]):
    """What building an integration's parts may use.

    Args:
        settings: the integration's own config section.
        stdout: where console-like sinks write (None: sys.stdout at write time).
        send_test: `sebridge check --send-test` will post a test message after the check.
        instance: the instance's name ("slack", "slack.dba"): its outbox key, what its
            inbound parts are told apart by (`path`, duty names), and what a sink names
            itself by (a webhook's id, a mail's Message-ID, its errors). The registry
            always sets it (registry.context).
    """

    settings: S
    core: Core
    renderer: Renderer
    stdout: TextIO | None = None
    send_test: bool = False
    instance: str = ""

    def path(self, integration: str, rest: str) -> str:
        """The instance's HTTP path under `/<integration>/`: "/slack/events" for the
        unnamed instance, "/slack/dba/events" for `[slack.dba]` (never the same path)."""
        named = self.instance.partition(".")[2]
        return f"/{integration}/{named}/{rest}" if named else f"/{integration}/{rest}"


class Desk(Protocol):
    """The approval use case as a channel sees it (approval/usecase.py: Approvals)."""

    def request(self, req: ApprovalRequest, *, wait: float = ...) -> Outcome:
        """Approve an event; the outcome once known (approved, already, refused, held)."""
        ...

    def take(self, event_id: str, actor: str, via: str, actor_id: str | None = None) -> bool:
        """Announce that someone handles the event; False when it is unknown or gone."""
        ...

    def event(self, event_id: str) -> EventRecord | None:
        """One event as the store holds it."""
        ...

    def open_events(self) -> list[EventRecord]:
        """Events in IMDS's document that nobody approved yet."""
        ...

    def refuse(self, req: ApprovalRequest, why: str) -> None:
        """Keep a refusal the channel decided on its own, for `sebridge history`."""
        ...


class Host(Protocol):
    """What a running daemon offers an integration's inbound side."""

    @property
    def approvals(self) -> Desk:
        """Where every approval goes."""
        ...

    def vm_name(self) -> str:
        """This VM's name, as IMDS's Resources spell it."""
        ...


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


@dataclass(frozen=True)
class Finding:
    """One result of `sebridge check`: ok, or a problem with what to do about it."""

    target: str  # the integration's name (`sebridge check` says the instance's)
    ok: bool
    message: str


@dataclass(frozen=True)
class TrialNote:
    """The one test message `sebridge check --send-test` asks each integration to post.

    Args:
        text: "sebridge test message — no action needed", naming the VM.
        vm_name: the VM it comes from.
    """

    text: str
    vm_name: str


class Integration(Generic[S]):
    """Base of every integration; a subclass overrides what it brings.

    Class attributes:
        name: the config section, the sink's name and the outbox key.
        title: how messages name it ("Slack").
        settings: the dataclass of its config section, or None for no section.
        outbound: whether `sink()` returns a sink (approval notices go to it).
        once: why it can be configured only once ("it writes to this process's
            stdout"); "" (the default): it may also have named instances, `[slack.dba]`,
            each built from its own section like `[slack]` (integrations/registry.py).
        reaches: the key of the address its checks reach ("slack.api_url"), named by
            `sebridge check` when they get no answer in time; "" for its name.
        transitions: the kinds of transition its instances deliver when their section
            has no `transitions` (model/kinds.py: every step, or the folded few).
    """

    name: ClassVar[str]
    title: ClassVar[str]
    settings: ClassVar[type[Any] | None] = None
    outbound: ClassVar[bool] = False
    # The kinds of transition its instances deliver unless `transitions` says otherwise.
    transitions: ClassVar[frozenset[str]] = EVERY_STEP
    once: ClassVar[str] = ""
    reaches: ClassVar[str] = ""

    def defaults(self) -> S:
        """The settings when the file has no section (every key at its default)."""
        return cast(S, self.settings() if self.settings is not None else None)

    def enabled(self, settings: S, in_file: bool) -> bool:
        """Whether these settings turn the integration on (`in_file`: its section is there):
        by default, what the settings say of themselves (their `enabled` key or property)."""
        return bool(getattr(settings, "enabled", False))

    def validate(self, settings: S, rd: Reader, core: Core) -> S:
        """Checks beyond types (report to `rd`); returns the settings, normalised."""
        return settings

    def sink(self, ctx: Context[S]) -> Sink | None:
        """The outbound sink, its templates tried now (a broken one raises ConfigError)."""
        return None

    def inbound(self, ctx: Context[S], host: Host, sink: Sink | None) -> Inbound:
        """Routes, services and jobs for a running daemon (`sebridge run`, not `once`)."""
        return Inbound()

    def check(self, ctx: Context[S]) -> Sequence[Finding]:
        """Connectivity checks for `sebridge check`; never raises for a remote's answer."""
        return ()

    def send_test(self, ctx: Context[S], note: TrialNote) -> Sequence[Finding]:
        """Post `note` once (`sebridge check --send-test`): a finding says where it arrived
        (or what was checked instead), or what to fix. Never raises for a remote's answer."""
        return ()


class Templated(Protocol):
    """A sink whose messages come from templates."""

    def check_templates(self) -> None:
        """Render every template against sample messages; a broken one raises, naming it."""
        ...

    def close(self) -> None:
        """Release connections and files."""
        ...


T = TypeVar("T", bound=Templated)


def tried(sink: T, renderer: Renderer | None = None, folder: str = "") -> T:
    """`sink`, its templates tried now (at start, not at the first event); when one is
    broken the sink is closed and the error (a PermanentDeliveryError naming it) raised.
    With the `renderer` its templates come from and their `folder`, a sink whose
    templates are all built-in may have its check held back (Renderer.later)."""
    if renderer is not None and renderer.later(folder, sink.check_templates):
        return sink
    try:
        sink.check_templates()
    except BaseException:
        sink.close()
        raise
    return sink
