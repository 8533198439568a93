"""The console: one readable line per transition on stdout; on by default."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sebridge.integrations.base import Context, Integration

if TYPE_CHECKING:
    from sebridge.sink import Sink

__all__ = ["Console", "ConsoleSettings"]


@dataclass(frozen=True)
class ConsoleSettings:
    """[console]: the log sink."""

    enabled: bool = True


class Console(Integration[ConsoleSettings]):
    """Lines rendered from templates/console/line.j2."""

    name = "console"
    title = "console"
    outbound = True
    settings = ConsoleSettings

    def enabled(self, settings: ConsoleSettings, in_file: bool) -> bool:
        return settings.enabled

    def sink(self, ctx: Context[ConsoleSettings]) -> Sink:
        from sebridge.integrations.console.sink import ConsoleSink

        sink = ConsoleSink(ctx.renderer, stream=ctx.stdout)
        sink.check_templates()
        return sink
