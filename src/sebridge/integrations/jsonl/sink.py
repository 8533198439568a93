"""JSON lines sink: one object per transition, on stdout or appended to a file (log shippers).

Each line carries the transition's id. When an earlier attempt may have
landed (Message.maybe_sent: its answer lost, or the daemon killed between
the write and recording it), the sink first looks for that id in the file's
last TAIL bytes and writes nothing if the line is there. The retry comes
right after the crash and this sink is the file's only writer (one daemon
per store), so the line, if written, is among the last ones. A file
rotated away in between is not searched. What cannot be looked at is
marked instead: on stdout, or when the earlier attempt was another agent's
(a fleet: it died, this one took over, and its line, if any, is in its own
host's file), the line says `"maybe_repeat": true`.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import sys
import threading
from dataclasses import asdict
from typing import Any, BinaryIO, TextIO

from sebridge.integrations.jsonl.sandbox import drop_in_fix
from sebridge.kernel.errors import PermanentDeliveryError, RetryableDeliveryError
from sebridge.model import HookRun, Receipt
from sebridge.model.message import Message
from sebridge.model.wording.outlook import approve_command, not_ready, said_while_held, tells_next

__all__ = ["TAIL", "JsonlSink", "hook_fields", "record"]

log = logging.getLogger(__name__)

TAIL = 64 * 1024  # bytes read back from the end of the file to find an earlier attempt's line

# Write errors no retry can cure: the path names a folder, or goes through a file.
_NEVER_WRITABLE = frozenset({errno.EISDIR, errno.ENOTDIR, errno.ENAMETOOLONG})


def record(message: Message, maybe_repeat: bool = False) -> dict[str, Any]:
    """The JSON object written for a message: stable keys, snake_case. maybe_repeat: an
    earlier attempt may have written this line where we cannot look. `approve_url` and
    `approve_command` are there only while an approval would be carried out now."""
    t, e = message.transition, message.transition.event
    later = message.outlook(t.at)  # only what it says, never its "in N min", is written
    about_next = message.held or tells_next(t, later)
    line = {
        "ts": t.at.isoformat(),
        "transition_id": message.transition_id,
        "transition": t.kind,
        "event_id": e.event_id,
        "event_type": e.event_type,
        # IMDS's status as of the transition: a recover hook runs after the event left
        # IMDS, so it has none (the event's last seen status is on its completed line).
        "status": None if t.hook and t.hook.stage == "recover" else e.status,
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
        # The decision, on every line: its action and the rule that chose it.
        "action": message.policy,
        "rule": message.rule,
        "approval": message.approval,
        # Who approved, by name, as of this line, and whether that approval was carried out
        # anyway (despite the VMs `not_ready` names): a fact of its own.
        "approved_by": message.decider[0],
        "anyway": message.decider[2],
        "dry_run": message.dry_run or t.dry_run,
        "note": t.note,
        # Hook transitions: which hook ran on which VM, and how it ended (else nulls).
        **hook_fields(t.hook),
        "remind_before": t.remind_before,
        # A reminder's other lead, and whether the event's approval was held when it was
        # recorded; a first message's leads that can never come (each {rule key: seconds}).
        "remind_after": t.remind_after,
        "while_held": said_while_held(t),
        "unreachable_reminders": [{lead.key: lead.seconds} for lead in t.unreachable],
        # What happens next (model/wording/outlook.py): for a held event (or one whose approval
        # would only be held: a prepare hook failed before anyone approved) and a
        # reminder, when Azure starts it anyway; every listed VM not ready; held, the
        # ways out.
        "azure_starts_at": e.not_before.isoformat()
        if about_next and later.starts and e.not_before
        else None,
        "not_ready": [
            {"vm": v.vm, "state": str(v.state), "hook": v.hook, "why": v.why}
            for v in not_ready(message.readiness)
        ],
        "ways_out": [command for command, _ in later.ways_out],
        "maybe_repeat": maybe_repeat,
    }
    if message.approvable and message.approve_url:
        line["approve_url"] = message.approve_url
    if message.approvable:
        line["approve_command"] = approve_command(e.event_id)
    return line


def hook_fields(run: HookRun | None) -> dict[str, Any]:
    """A line's hook keys: which hook ran on which VM and how it ended (None: all null)."""
    fields = ("hook", "vm", "stage", "attempt", "exit_code", "timed_out", "seconds", "output")
    values = asdict(run) if run else {}
    return {"hook_vm" if f == "vm" else f: values.get(f) for f in fields}


class JsonlSink:
    """Writes one JSON line per transition. path "-" is stdout."""

    def __init__(self, path: str = "-", stream: TextIO | None = None) -> None:
        self._path = path
        self._stream = stream
        self._lock = threading.Lock()
        self._read_only_said = False

    def send(self, message: Message) -> Receipt | None:
        """Append the line and flush it (fsync for files: a line delivered is on disk)."""
        unseen = message.maybe_sent and (self._path == "-" or message.begun_elsewhere)
        data = record(message, maybe_repeat=unseen)
        # ASCII: any string IMDS sends (a lone surrogate, U+2028) is written as its \u
        # escape, so every line encodes, stays one line, and reads back as it came.
        line = json.dumps(data, separators=(",", ":"), ensure_ascii=True)
        try:
            with self._lock:
                if self._path == "-":
                    # stdout cannot be read back: no check; a retry's line is marked.
                    stream = self._stream or sys.stdout
                    stream.write(line + "\n")
                    stream.flush()
                    return None
                # Opened per line so log rotation (rename + new file) just works.
                with open(self._path, "a+b") as out:
                    prefix = b""
                    if message.maybe_sent:
                        tail = _tail(out)
                        if _written(tail, data):
                            return None
                        # A line cut short (power lost mid-write) must not swallow ours.
                        prefix = b"\n" if tail and not tail.endswith(b"\n") else b""
                    out.write(prefix + line.encode() + b"\n")
                    out.flush()
                    os.fsync(out.fileno())
                self._read_only_said = False
        except OSError as exc:
            if exc.errno in _NEVER_WRITABLE:  # retrying cannot help: a person must fix the path
                raise PermanentDeliveryError(f"jsonl: cannot write {self._path}: {exc}") from None
            raise RetryableDeliveryError(self._why(exc)) from None
        except ValueError as exc:  # a closed stream
            raise RetryableDeliveryError(f"jsonl: cannot write {self._path}: {exc}") from None
        return None

    def _why(self, exc: OSError) -> str:
        """The retried error; a read-only file system (the unit's ProtectSystem=strict)
        names the key and the drop-in that allows the path, logged once until a line is
        written (the dispatcher's retry lines repeat the error, not the fix)."""
        said = f"jsonl: cannot write {self._path}: {exc}"
        if exc.errno != errno.EROFS:
            return said
        folder = os.path.dirname(os.path.abspath(self._path))
        fix = (
            f"jsonl.path: {self._path} is on a read-only file system for this service"
            f" (the unit's ProtectSystem=strict?): {drop_in_fix(folder)}"
        )
        if not self._read_only_said:
            self._read_only_said = True
            log.error("%s", fix)
        return f"{said}; {fix}"

    def close(self) -> None:
        """Nothing held open between lines."""


def _tail(out: BinaryIO) -> bytes:
    """The file's last TAIL bytes."""
    size = out.seek(0, os.SEEK_END)
    out.seek(max(0, size - TAIL))
    return out.read()


def _written(tail: bytes, data: dict[str, Any]) -> bool:
    """Whether `tail` holds the line of this transition. The id alone could match a
    line from a store since deleted; with the event, kind and time it cannot."""
    if not data["transition_id"]:
        return False
    key = ("transition_id", "event_id", "transition", "ts")
    needle = f'"transition_id":{data["transition_id"]},'.encode()
    for raw in tail.splitlines():
        if needle not in raw:
            continue
        try:
            found = json.loads(raw)
        except ValueError:  # the cut first line of the tail, or a torn one
            continue
        if isinstance(found, dict) and all(found.get(k) == data[k] for k in key):
            return True
    return False
