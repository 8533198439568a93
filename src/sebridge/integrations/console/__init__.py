"""The console: one readable line per transition on stdout; on by default."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sebridge.integrations.base import Context, Finding, Integration, TrialNote, tried

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sebridge.model.message import Sink

__all__ = ["Console", "ConsoleSettings"]


@dataclass(frozen=True)
class ConsoleSettings:
    """[console]: the log sink."""

    # Print one readable line per transition on stdout.
    enabled: bool = True


class Console(Integration[ConsoleSettings]):
    """Lines rendered from templates/console/line.j2."""

    name = "console"
    title = "console"
    outbound = True
    once = "it writes to this process's stdout, and the service's log is one"
    settings = ConsoleSettings

    def sink(self, ctx: Context[ConsoleSettings]) -> Sink:
        from sebridge.integrations.console.sink import ConsoleSink

        return tried(ConsoleSink(ctx.renderer, stream=ctx.stdout), ctx.renderer, "console")

    def send_test(self, ctx: Context[ConsoleSettings], note: TrialNote) -> Sequence[Finding]:
        out = ctx.stdout or sys.stdout
        print(note.text, file=out, flush=True)
        # check prints where it runs; the service's console is its journal.
        return [Finding("console", True, "test line printed here (the service's goes to its log)")]
