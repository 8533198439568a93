"""JSON lines: one object per transition, on stdout or appended to a file (log shippers)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sebridge.config_reader import Reader
from sebridge.integrations.base import Context, Integration

if TYPE_CHECKING:
    from sebridge.config import Config
    from sebridge.sink import Sink

__all__ = ["Jsonl", "JsonlSettings"]


@dataclass(frozen=True)
class JsonlSettings:
    """[jsonl]: on when the table is in the file (unless enabled = false)."""

    path: str = "-"  # "-" = stdout
    enabled: bool = True


class Jsonl(Integration[JsonlSettings]):
    """The JSON lines sink."""

    name = "jsonl"
    title = "JSON lines"
    outbound = True
    settings = JsonlSettings

    def enabled(self, config: Config) -> bool:
        return self.name in config.given and self.settings_of(config).enabled

    def validate(self, settings: JsonlSettings, config: Config, rd: Reader) -> JsonlSettings:
        if not settings.path:
            rd.required("jsonl.path", '(write "-" for stdout)')
        elif settings.path != "-" and os.path.isdir(settings.path):
            rd.error("jsonl.path", f"{settings.path} is a folder; name a file (lines are appended)")
        return settings

    def sink(self, ctx: Context) -> Sink:
        from sebridge.integrations.jsonl.sink import JsonlSink

        return JsonlSink(self.settings_of(ctx.config).path, stream=ctx.stdout)
