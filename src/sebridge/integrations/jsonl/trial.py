"""`sebridge check --send-test` for JSON lines: one line whose transition is "test".

The line has every key a transition's line has (sink.record), in its order,
empty where there is no event and `maybe_repeat` false, so a reader keyed on
them does not break; `transition` is "test" (the marker) and `note` the test
text. A file that does not exist yet is not
created: the daemon creates it (as its own user) with its first line.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TextIO

from sebridge.integrations.base import Finding, TrialNote
from sebridge.integrations.jsonl.sink import hook_fields
from sebridge.kernel.clock import utcnow

__all__ = ["send_trial", "trial_line"]


def send_trial(path: str, note: TrialNote, stream: TextIO | None) -> Finding:
    """Write the test line to `path` ("-": `stream`, else stdout)."""
    line = json.dumps(trial_line(note), separators=(",", ":"), ensure_ascii=False)
    if path == "-":
        out = stream or sys.stdout
        out.write(line + "\n")
        out.flush()
        return Finding("jsonl", True, 'test line written on stdout ("transition":"test")')
    if not os.path.exists(path):
        return Finding(
            "jsonl",
            True,
            f"{path} does not exist yet: no test line written"
            " (the daemon creates the file; its folder exists)",
        )
    try:
        with open(path, "ab") as out_file:
            out_file.write(line.encode() + b"\n")
    except OSError as exc:
        return Finding("jsonl", False, f"cannot write {path}: {exc.strerror}")
    return Finding("jsonl", True, f'test line appended to {path} ("transition":"test")')


def trial_line(note: TrialNote) -> dict[str, object]:
    """The test line's keys and values (a webhook's test delivery posts them too)."""
    return {
        "ts": utcnow().isoformat(),
        "transition_id": 0,
        "transition": "test",
        "event_id": None,
        "event_type": None,
        "status": None,
        "not_before": None,
        "not_before_text": None,
        "resources": [],
        "this_vm": False,
        "vm": note.vm_name,
        "description": None,
        "source": None,
        "duration_seconds": None,
        "changes": [],
        "actor": None,
        "via": None,
        "policy": None,
        "action": None,
        "rule": None,
        "approval": None,
        "approved_by": None,
        "anyway": False,
        "dry_run": False,
        "note": note.text,
        **hook_fields(None),  # sink.record's hook fields, all null: no hook ran
        "remind_before": None,
        "remind_after": None,
        "while_held": False,
        "unreachable_reminders": [],
        "azure_starts_at": None,
        "not_ready": [],
        "ways_out": [],
        "maybe_repeat": False,
    }
