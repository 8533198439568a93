"""What a rig is: how the integration contract (test_integration_contract.py) drives one
integration, and what every rig checks the same way.

A rig starts its integration's fake on 127.0.0.1:0 (tests/fakes), gives the config
section that points at it, builds the sink from that section the way the runtime does
(config loader, `Integration.sink`), and makes the fake answer the next delivery's
request with a status and a Retry-After, or hang. It says which statuses its API
waits for without a Retry-After, which secrets must never show, and how what arrived
is bounded and escaped its API's way (`check_arrived`). A host-local sink says why
the HTTP cases do not apply to it (`local`).
"""

from __future__ import annotations

import io
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from helpers import free_port
from sebridge.config import loader as config_loader
from sebridge.config.loader import Config
from sebridge.integrations.base import Integration
from sebridge.integrations.registry import REGISTRY, Sections, context
from sebridge.integrations.render import Renderer
from sebridge.model.message import Message, Sink

# What a reader's screen or terminal would act on rather than show (newlines aside).
ACTING = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
# IMDS text holding what Slack's mrkdwn, Teams' markdown and Jira's wiki markup would act on.
MARKUP = '<!channel> <@U0123ABCD> **bold** [link](http://evil.example) {code}[x|http://evil.example] & "q"'


def strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def assert_displayable(texts: Sequence[str], *, markup: Sequence[str] = ()) -> None:
    """Shown the way chat, cards and tickets show IMDS text: nothing acting, and none of
    `markup` (what the API would act on) as IMDS sent it."""
    assert texts
    for text in texts:
        assert not ACTING.search(text), (ACTING.search(text), text[:200])
        assert not any(m in text for m in markup), text[:200]


def registered(cls: type[Integration[Any]]) -> Integration[Any]:
    """The registry's instance of an integration class."""
    (found,) = [i for i in REGISTRY if type(i) is cls]
    return found


class Rig:
    """One integration under the contract; a context manager around its fake."""

    integration: ClassVar[Integration[Any]]
    local: ClassVar[str] = ""  # why the HTTP cases do not apply ("": they do)
    throttles: ClassVar[Mapping[int, float]] = {429: 1.0}  # waited for without Retry-After
    no_retry_after: ClassVar[str] = ""  # why its protocol cannot say when to retry ("": it can)

    def __init__(self) -> None:
        self._sinks: list[Sink] = []
        self._holds: list[threading.Event] = []
        self.fake: Any = None  # the fake server (a context manager), entered with the rig

    def __enter__(self) -> Rig:
        if self.fake is not None:
            self.fake.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        for hold in self._holds:
            hold.set()
        for sink in self._sinks:
            sink.close()
        if self.fake is not None:
            self.fake.__exit__(None, None, None)

    @property
    def name(self) -> str:
        return self.integration.name

    def section(self) -> dict[str, Any]:
        """Its `[name]` config section, pointing at the fake."""
        raise NotImplementedError

    def port(self) -> int:
        """The fake's port (a section moved to a closed port is unreachable)."""
        raise NotImplementedError

    def unreachable(self) -> dict[str, Any]:
        """Its section moved to a port nothing listens on (connections are refused)."""
        moved = f"127.0.0.1:{self.port()}", f"127.0.0.1:{free_port()}"
        return {
            k: v.replace(*moved) if isinstance(v, str) else v for k, v in self.section().items()
        }

    def config(self, section: dict[str, Any] | None = None) -> Config:
        """The configuration with this section, read as `sebridge` reads a file."""
        known = {i.name: i for i in (*REGISTRY, self.integration)}  # the throwaway is in none
        data = {self.name: self.section() if section is None else section}
        return config_loader.from_mapping(data, sections=Sections(list(known.values())), environ={})

    def sink(self, section: dict[str, Any] | None = None) -> Sink:
        """The sink, built from the section as the runtime builds it."""
        ctx = context(self.integration, self.config(section), Renderer(), self.stdout())
        sink = self.integration.sink(ctx)
        assert sink is not None
        self._sinks.append(sink)
        return sink

    def impatient(self, seconds: float) -> Sink:
        """A sink that waits `seconds` for an answer."""
        return self.sink({**self.section(), "timeout": seconds})

    def stdout(self) -> io.StringIO | None:
        return None

    def answer(self, status: int, retry_after: int | None = None) -> None:
        """The next delivery's request is answered `status` (with Retry-After, when given),
        its body echoing the secrets, as a careless server would."""
        raise NotImplementedError

    def hang(self) -> None:
        """The next delivery's request gets no answer until the rig is closed."""
        raise NotImplementedError

    def secrets(self) -> list[str]:
        raise NotImplementedError

    def delivered(self) -> int:
        """How many messages reached the far end."""
        raise NotImplementedError

    def check_arrived(self, sent: Sequence[Message]) -> None:
        """What arrived is within the API's limits and escaped its way."""
        raise NotImplementedError

    def _held(self, release: threading.Event) -> None:
        self._holds.append(release)
