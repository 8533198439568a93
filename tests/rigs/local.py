"""The host-local sinks' rigs: the console's stream and a JSON lines file; no HTTP."""

from __future__ import annotations

import io
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rigs.base import ACTING, Rig, registered
from sebridge.integrations.console import Console
from sebridge.integrations.console.sink import MAX_LINE
from sebridge.integrations.jsonl import Jsonl
from sebridge.integrations.jsonl.sink import record
from sebridge.model.message import Message


class ConsoleRig(Rig):
    integration = registered(Console)
    local = (
        "host-local: a line written to the service's stdout: no HTTP answer to classify,"
        " no connection to lose, no secret to keep"
    )

    def __init__(self) -> None:
        super().__init__()
        self.out = io.StringIO()

    def section(self) -> dict[str, Any]:
        return {"enabled": True}

    def stdout(self) -> io.StringIO | None:
        return self.out

    def delivered(self) -> int:
        return self.out.getvalue().count("\n")

    def check_arrived(self, sent: Sequence[Message]) -> None:
        lines = self.out.getvalue().splitlines(keepends=True)
        assert len(lines) == len(sent) and all(line.endswith("\n") for line in lines)
        for line in lines:  # one line per transition, what a terminal shows, bounded
            assert not ACTING.search(line[:-1]) and len(line) <= MAX_LINE + 1
            line.encode("utf-8")


class JsonlRig(Rig):
    integration = registered(Jsonl)
    local = (
        "host-local: a line appended to a file: no HTTP answer to classify, no connection"
        " to lose, no secret to keep"
    )

    def __init__(self) -> None:
        super().__init__()
        self._folder = tempfile.TemporaryDirectory()
        self.path = Path(self._folder.name) / "events.jsonl"

    def __exit__(self, *exc: object) -> None:
        super().__exit__()
        self._folder.cleanup()

    def section(self) -> dict[str, Any]:
        return {"path": str(self.path)}

    def delivered(self) -> int:
        return self.path.read_bytes().count(b"\n") if self.path.exists() else 0

    def check_arrived(self, sent: Sequence[Message]) -> None:
        # JSON lines keep IMDS's text as sent (ARCHITECTURE.md, "Hostile text"): ASCII
        # escapes, one line each, read back equal; bounded by IMDS's document (4 MiB).
        lines = self.path.read_bytes().splitlines()
        assert len(lines) == len(sent)
        for line, message in zip(lines, sent, strict=True):
            assert json.loads(line.decode("ascii")) == json.loads(json.dumps(record(message)))
