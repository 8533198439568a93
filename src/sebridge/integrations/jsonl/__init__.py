"""JSON lines: one object per transition, on stdout or appended to a file (log shippers)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sebridge.config.reader import Reader
from sebridge.integrations.base import Context, Core, Finding, Integration, TrialNote

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sebridge.model.message import Sink

__all__ = ["Jsonl", "JsonlSettings"]


@dataclass(frozen=True)
class JsonlSettings:
    """[jsonl]: on when the table is in the file (unless enabled = false)."""

    # "-": stdout; else a file each line is appended to (after a crash, each line's
    # transition_id is looked for in its tail, so no line is written twice).
    path: str = "-"
    # false: keep the table but switch the sink off.
    enabled: bool = True


class Jsonl(Integration[JsonlSettings]):
    """The JSON lines sink."""

    name = "jsonl"
    title = "JSON lines"
    outbound = True
    reaches = "jsonl.path"
    settings = JsonlSettings

    def enabled(self, settings: JsonlSettings, in_file: bool) -> bool:
        return in_file and settings.enabled

    def validate(self, settings: JsonlSettings, rd: Reader, core: Core) -> JsonlSettings:
        if not settings.path:
            rd.required("jsonl.path", '(write "-" for stdout)')
        elif settings.path != "-":
            _check_path(settings.path, rd)
        return settings

    def sink(self, ctx: Context[JsonlSettings]) -> Sink:
        from sebridge.integrations.jsonl.sink import JsonlSink

        return JsonlSink(ctx.settings.path, stream=ctx.stdout)

    def check(self, ctx: Context[JsonlSettings]) -> Sequence[Finding]:
        """A file's folder must exist (the daemon creates files, never folders), and the
        installed unit's sandbox must let the service write there (sandbox.py)."""
        path = ctx.settings.path
        if path == "-":
            return ()
        from sebridge.integrations.jsonl import sandbox

        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            return [
                Finding(
                    "jsonl.path",
                    False,
                    f"the folder {folder} does not exist: the daemon creates {path}, never"
                    " its folder (make it, writable by the service)",
                )
            ]
        forbidden = sandbox.unit_forbids(path, sandbox.UNIT_DIR)
        return [Finding("jsonl.path", False, forbidden)] if forbidden else ()

    def send_test(self, ctx: Context[JsonlSettings], note: TrialNote) -> Sequence[Finding]:
        from sebridge.integrations.jsonl.trial import send_trial

        return [send_trial(ctx.settings.path, note, ctx.stdout)]


def _check_path(path: str, rd: Reader) -> None:
    """Refuse a path no write can ever succeed on; warn when its folder is missing."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        rd.error("jsonl.path", f"{path} is a folder; name a file (lines are appended)")
    elif os.path.exists(folder) and not os.path.isdir(folder):
        rd.error("jsonl.path", f"{folder} is a file, not a folder: {path} cannot be created")
    elif not os.path.exists(folder):
        rd.warnings.append(
            f"jsonl.path: the folder {folder} does not exist; lines wait (and are retried) "
            "until it does"
        )
