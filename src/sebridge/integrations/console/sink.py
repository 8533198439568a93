"""Console sink: one readable line per transition on a stream (stdout by default)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TextIO

import jinja2

from sebridge.errors import PermanentDeliveryError, RetryableDeliveryError
from sebridge.model import Receipt, ScheduledEvent, Transition, TransitionKind
from sebridge.render import Renderer
from sebridge.sink import Message

__all__ = ["ConsoleSink"]

TEMPLATE = "console/line.j2"
SAMPLE_EVENT = ScheduledEvent(
    "C7061BAC-AFDC-4513-B24B-AA5F13A16123",
    "Freeze",
    "Scheduled",
    ("vm1", "vm2"),
    not_before_text="Mon, 11 Apr 2022 22:26:58 GMT",
    description="Virtual machine is being paused because of a memory-preserving Live Migration.",
    source="Platform",
    duration_seconds=5,
)


class ConsoleSink:
    """Readable lines, rendered from templates/console/line.j2."""

    name = "console"

    def __init__(
        self,
        renderer: Renderer,
        stream: TextIO | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._renderer = renderer
        self._stream = stream
        self._clock = clock
        self._lock = threading.Lock()

    def render(self, message: Message) -> str:
        """The line this message prints. A broken template is a PermanentDeliveryError."""
        t = message.transition
        try:
            return self._renderer.render(
                TEMPLATE,
                t=t,
                e=t.event,
                vm=message.vm_name,
                policy=message.policy,
                dry_run=message.dry_run,
                now=self._clock(),
            )
        except jinja2.TemplateSyntaxError as exc:
            where = f"{exc.filename or TEMPLATE}, line {exc.lineno}"
            raise PermanentDeliveryError(f"console: template {where}: {exc.message}") from None
        except jinja2.TemplateError as exc:
            raise PermanentDeliveryError(f"console: template {TEMPLATE}: {exc}") from None

    def check_templates(self) -> None:
        """Render the line for every kind of transition now, so a broken template fails at start."""
        for kind in TransitionKind:
            self.render(Message(Transition(kind, SAMPLE_EVENT, self._clock()), "vm1", "notify"))

    def send(self, message: Message) -> Receipt | None:
        """Print the line."""
        line = self.render(message)
        stream = self._stream or sys.stdout
        try:
            with self._lock:
                stream.write(line + "\n")
                stream.flush()
        except (OSError, ValueError) as exc:  # a closed pipe or stream
            raise RetryableDeliveryError(f"console: cannot write: {exc}") from None
        return None

    def close(self) -> None:
        """Nothing to release: the stream belongs to the caller."""
