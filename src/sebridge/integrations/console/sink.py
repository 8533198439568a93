"""Console sink: one readable line per transition on a stream (stdout by default)."""

from __future__ import annotations

import sys
import threading
from typing import TextIO

from sebridge.integrations.render import Renderer
from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.errors import RetryableDeliveryError
from sebridge.kernel.text import clip, visible
from sebridge.model import Receipt
from sebridge.model.message import Message

__all__ = ["MAX_LINE", "ConsoleSink"]

TEMPLATE = "console/line.j2"
# journald splits a line over its LineMax (48 KiB) into several records, and a log
# shipper reads those as several lines: 8,192 characters of at most 4 bytes stay one.
MAX_LINE = 8192
MAYBE_REPEAT = " (may repeat: an earlier attempt may have printed this line)"


class ConsoleSink:
    """Readable lines, rendered from templates/console/line.j2."""

    def __init__(
        self,
        renderer: Renderer,
        stream: TextIO | None = None,
        clock: Clock = utcnow,
    ) -> None:
        self._renderer = renderer
        self._stream = stream
        self._clock = clock
        self._lock = threading.Lock()

    def render(self, message: Message) -> str:
        """The line this message prints. A broken template is a PermanentDeliveryError."""
        t = message.transition
        now = self._clock()
        return self._renderer.render_for(
            "console",
            TEMPLATE,
            t=t,
            e=t.event,
            vm=message.vm_name,
            policy=message.policy,
            rule=message.rule,
            decided=message.decided,
            dry_run=message.dry_run,
            now=now,
            prepare=message.prepare,
            approvable=message.approvable,
            approve_url=message.approve_url if message.approvable else None,
            held=message.held,
            next=message.outlook(now),
        )

    def check_templates(self) -> None:
        """Render the line for every kind of transition now, so a broken template fails at start."""
        from sebridge.integrations.samples import sample_messages

        for sample in sample_messages():
            self.render(sample)

    def send(self, message: Message) -> Receipt | None:
        """Print the line, IMDS's text in it shown escaped (kernel/text.py: one line per
        transition, nothing a terminal would act on, nothing it cannot encode, at most
        MAX_LINE characters); a retry
        after an attempt that may have printed it says so (a console keeps nothing to
        look at)."""
        line = clip(visible(self.render(message)), MAX_LINE)
        if message.maybe_sent:
            line += MAYBE_REPEAT
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
