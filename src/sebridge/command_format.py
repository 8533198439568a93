"""How the commands show what they found: tables for people, JSON for scripts."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, TextIO

from sebridge.render import countdown
from sebridge.store import EventRecord, HistoryEntry
from sebridge.store.codec import event_to_dict

__all__ = ["dump", "event_json", "history_json", "table", "when"]


def when(r: EventRecord, now: datetime) -> str:
    """NOT BEFORE: a countdown; text IMDS sent that is no time we can read; else "-"."""
    text = (r.event.not_before_text or "").strip()
    return countdown(r.event.not_before, now) or (f'unknown ("{text}")' if text else "-")


def event_json(r: EventRecord) -> dict[str, Any]:
    """One event as `sebridge events --json` shows it."""
    return {
        **event_to_dict(r.event),
        "state": r.state,
        "policy": r.policy,
        "present": r.present,
        "first_seen": r.first_seen.isoformat(),
        "gone_at": r.gone_at.isoformat() if r.gone_at else None,
        "approval": {
            "actor": r.approval.actor,
            "via": r.approval.via,
            "state": r.approval.state,
            "error": r.approval.last_error,
        }
        if r.approval
        else None,
        "deliveries": [
            {"sink": d.sink, "state": d.state, "attempts": d.attempts, "error": d.last_error}
            for d in r.deliveries
        ],
    }


def history_json(e: HistoryEntry) -> dict[str, Any]:
    """One transition as `sebridge history --json` shows it."""
    t = e.transition
    return {
        "id": e.id,
        "at": e.at.isoformat(),
        "kind": t.kind,
        "event_id": t.event_id,
        "event_type": t.event.event_type,
        "changes": list(t.changes),
        "actor": t.actor,
        "via": t.via,
        "dry_run": t.dry_run,
        "deliveries": [
            {"sink": d.sink, "state": d.state, "attempts": d.attempts, "error": d.last_error}
            for d in e.deliveries
        ],
    }


def table(head: list[str], rows: list[list[str]], out: TextIO) -> None:
    """Columns padded to their widest cell."""
    widths = [max(len(str(c)) for c in col) for col in zip(head, *rows, strict=False)]
    for row in (head, *rows):
        print(
            "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)).rstrip(), file=out
        )


def dump(data: Any, out: TextIO) -> None:
    """Indented JSON and a newline."""
    json.dump(data, out, indent=2)
    out.write("\n")
