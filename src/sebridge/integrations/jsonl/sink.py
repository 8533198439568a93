"""JSON lines sink: one object per transition, on stdout or appended to a file (log shippers)."""

from __future__ import annotations

import errno
import json
import os
import sys
import threading
from typing import Any, TextIO

from sebridge.errors import PermanentDeliveryError, RetryableDeliveryError
from sebridge.model import Receipt
from sebridge.sink import Message

__all__ = ["JsonlSink", "record"]

# Write errors no retry can cure: the path names a folder, or goes through a file.
_NEVER_WRITABLE = frozenset({errno.EISDIR, errno.ENOTDIR, errno.ENAMETOOLONG})


def record(message: Message) -> dict[str, Any]:
    """The JSON object written for a message: stable keys, snake_case."""
    t, e = message.transition, message.transition.event
    return {
        "ts": t.at.isoformat(),
        "transition": t.kind,
        "event_id": e.event_id,
        "event_type": e.event_type,
        "status": e.status,
        "not_before": e.not_before.isoformat() if e.not_before else None,
        "not_before_text": e.not_before_text,
        "resources": list(e.resources),
        "this_vm": e.affects(message.vm_name),
        "vm": message.vm_name,
        "description": e.description,
        "source": e.source,
        "duration_seconds": e.duration_seconds,
        "changes": list(t.changes),
        "actor": t.actor,
        "via": t.via,
        "policy": message.policy,
        "dry_run": message.dry_run or t.dry_run,
        "note": t.note,
    }


class JsonlSink:
    """Writes one JSON line per transition. path "-" is stdout."""

    name = "jsonl"

    def __init__(self, path: str = "-", stream: TextIO | None = None) -> None:
        self._path = path
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, message: Message) -> Receipt | None:
        """Append the line and flush it (fsync for files: a line delivered is on disk)."""
        line = json.dumps(record(message), separators=(",", ":"), ensure_ascii=False)
        try:
            with self._lock:
                if self._path == "-":
                    stream = self._stream or sys.stdout
                    stream.write(line + "\n")
                    stream.flush()
                else:
                    # Opened per line so log rotation (rename + new file) just works.
                    with open(self._path, "a", encoding="utf-8") as out:
                        out.write(line + "\n")
                        out.flush()
                        os.fsync(out.fileno())
        except OSError as exc:
            if exc.errno in _NEVER_WRITABLE:  # retrying cannot help: a person must fix the path
                raise PermanentDeliveryError(f"jsonl: cannot write {self._path}: {exc}") from None
            raise RetryableDeliveryError(f"jsonl: cannot write {self._path}: {exc}") from None
        except ValueError as exc:  # a closed stream
            raise RetryableDeliveryError(f"jsonl: cannot write {self._path}: {exc}") from None
        return None

    def close(self) -> None:
        """Nothing held open between lines."""
