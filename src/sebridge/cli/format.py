"""How the commands show what they found: tables for people, JSON for scripts.

Text for people passes through `visible()`: IMDS may send any string (an EventId with a
newline, a type with a terminal escape), and one row must stay one line that shows what
was sent (docs/ARCHITECTURE.md, "Hostile text"). JSON keeps the original.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Any, TextIO

from sebridge.kernel.text import visible
from sebridge.model import TransitionKind
from sebridge.model.approval import Blocker, would_hold
from sebridge.model.decision import offers_approval
from sebridge.model.readiness import VmReadiness
from sebridge.model.records import ApprovalRecord, AuditEntry, EventRecord, HistoryEntry
from sebridge.model.wording.hooks import hook_news
from sebridge.model.wording.outlook import (
    Outlook,
    approve_command,
    approved_as,
    approver,
    decider,
    outlook,
    said_while_held,
    until,
)
from sebridge.store import Store
from sebridge.store.codec import event_to_dict

__all__ = [
    "approvable",
    "approval_json",
    "approved_by",
    "cut_note",
    "dump",
    "event_json",
    "held_lines",
    "history_json",
    "history_lines",
    "next_of",
    "table",
    "when",
]

_ENDS = (TransitionKind.COMPLETED, TransitionKind.CANCELLED)


def when(r: EventRecord, now: datetime) -> str:
    """NOT BEFORE: how long until then, in the one wording of a span (model/wording/outlook.py:
    until, as "Azure starts it anyway ... (in 19 min)" says it); text IMDS sent that is no
    time we can read; else "-"."""
    text = (r.event.not_before_text or "").strip()
    return until(r.event.not_before, now) or (f'unknown ("{text}")' if text else "-")


def holding(r: EventRecord, readiness: Sequence[VmReadiness]) -> bool:
    """Its readiness would hold an approval (model/approval.py: would_hold), and its policy
    offers approvals (an "inform" event asks nobody)."""
    return would_hold(readiness, r.decision.on_prepare_failure, r.policy)


def next_of(r: EventRecord, readiness: Sequence[VmReadiness], now: datetime) -> Outlook:
    """What happens next to the event (model/wording/outlook.py), as of now."""
    return outlook(
        r.event,
        approval=r.approval.state if r.approval else None,
        readiness=readiness,
        now=now,
        over=not r.present,
        holding=r.blocker(holding=holding(r, readiness)) == Blocker.WOULD_HOLD,
    )


def approvable(r: EventRecord, readiness: Sequence[VmReadiness] = ()) -> bool:
    """An approval of this event would be carried out now, and its policy offers one: the
    rule every Approve affordance follows (model/approval.py: blocker; an event whose
    readiness would hold an approval offers none)."""
    return r.blocker(holding=holding(r, readiness)) is None and offers_approval(r.policy)


def held_lines(r: EventRecord, later: Outlook) -> list[str]:
    """`sebridge events` for a held event (or one nobody approved whose approval would only
    be held): held and why, when Azure starts it anyway, the VMs not ready, the ways out
    (each line `visible()`)."""
    if r.approval is None:  # the VMs' lines below say which hook failed where, and why
        lines = [f"! {r.event.event_id} not approved; an approval would be held: not ready"]
    else:
        why = r.approval.last_error or "a prepare hook failed"
        lines = [f"! {r.event.event_id} held, not approved: {why}"]
    lines += [f"    {line}" for line in later.lines()]
    return [visible(line) for line in lines]


def event_json(
    r: EventRecord,
    *,
    later: Outlook | None = None,
    not_ready: Sequence[VmReadiness] = (),
    approve_url: str | None = None,
    readiness: Sequence[VmReadiness] = (),
) -> dict[str, Any]:
    """One event as `sebridge events --json` shows it. `approve_url` is there only while an
    approval would be carried out now (and links are on): not while its `readiness` would
    hold one."""
    data = {
        **event_to_dict(r.event),
        "state": r.state,
        "policy": r.policy,
        "rule": r.decision.rule,
        "present": r.present,
        "first_seen": r.first_seen.isoformat(),
        "gone_at": r.gone_at.isoformat() if r.gone_at else None,
        "approval": approval_json(r.approval) if r.approval else None,
        "deliveries": [
            {"sink": d.sink, "state": d.state, "attempts": d.attempts, "error": d.last_error}
            for d in r.deliveries
        ],
        # What happens next: when Azure starts it anyway (a held event), the VMs not ready,
        # and the ways out of a hold.
        "azure_starts_at": None,
        "not_ready": [
            {"vm": v.vm, "state": str(v.state), "hook": v.hook, "why": v.why} for v in not_ready
        ],
        "ways_out": [command for command, _ in later.ways_out] if later else [],
    }
    if later and later.held and later.starts:  # NotBefore, spelt as `not_before` is
        data["azure_starts_at"] = data.get("not_before")
    offered = approvable(r, readiness)
    if approve_url and offered:
        data["approve_url"] = approve_url
    if offered:
        data["approve_command"] = approve_command(r.event.event_id)
    return data


def approved_by(a: ApprovalRecord) -> str:
    """`events`' APPROVED BY: who decided, anyway and who asked first said once
    (model/wording/outlook.py: decider), and the approval's state."""
    who = decider(a.actor, a.via, anyway_by=a.anyway_by, anyway_via=a.anyway_via)
    return f"{who} ({a.state})"


def approval_json(a: ApprovalRecord) -> dict[str, Any]:
    """An event's approval in `events --json`: `actor` and `via` name who decided (one who
    approved anyway, when someone did: `anyway` true), `asked_first_by` the first approver
    whose approval was held or waited (kept: the history names them too)."""
    actor, via, _ = a.decider
    anyway = a.anyway_by is not None
    first = {"actor": a.actor, "via": a.via}
    return {
        "actor": actor,
        "via": via,
        "state": a.state,
        "error": a.last_error,
        "anyway": anyway,
        "asked_first_by": first if anyway and (a.actor, a.via) != (actor, via) else None,
    }


def history_line(e: HistoryEntry) -> str:
    """One transition as `sebridge history` prints it (without its deliveries)."""
    t = e.transition
    who = f" by {approver(t.actor, t.via)}" if t.actor else ""
    said = hook_news(t) or t.note
    if t.kind == TransitionKind.APPROVED and t.actor:  # an approval anyway names it once
        by, said = approved_as(t.actor, t.via, "", t.note)
        who = f" {by}"
    if t.remind_before is not None or t.remind_after is not None:
        lead = (
            f"{t.remind_before} s before NotBefore"
            if t.remind_before is not None
            else f"{t.remind_after} s after it was first announced"
        )
        # Held: an approval held, or (nobody approved it) one that would be.
        state = "held: a listed VM is not ready" if t.while_held else "nobody has approved it"
        said = f"{lead}, {state}"
    return (
        f"{e.at:%Y-%m-%d %H:%M:%S} {t.kind:<9} {t.event.event_type:<9} {t.event_id}{who}"
        f"{' [DRY RUN]' if t.dry_run else ''}{': ' + said if said else ''}"
    )


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
        "note": t.note,
        "hook": asdict(t.hook) if t.hook else None,
        "remind_before": t.remind_before,
        "remind_after": t.remind_after,
        "while_held": said_while_held(t),
        "deliveries": [
            {"sink": d.sink, "state": d.state, "attempts": d.attempts, "error": d.last_error}
            for d in e.deliveries
        ],
    }


def cut_note(shown: int, audit_shown: int, sizes: tuple[int, int]) -> str:
    """What `history` says when it shows only the newest `limit` transitions (or refused
    actions) of more: how many of how many, and how to see the rest; "" when it shows all."""
    transitions, audit = sizes
    if shown >= transitions and audit_shown >= audit:
        return ""
    parts = []
    if shown < transitions:
        parts.append(f"the newest {shown} of {transitions} transitions")
    if audit_shown < audit:
        parts.append(f"the newest {audit_shown} of {audit} refused actions")
    return f"(showing {' and '.join(parts)}; --limit {max(transitions, audit)} shows them all)"


def table(head: list[str], rows: list[list[str]], out: TextIO) -> None:
    """Columns padded to their widest cell, each cell `visible()`."""
    rows = [[visible(str(c)) for c in row] for row in rows]
    widths = [max(len(str(c)) for c in col) for col in zip(head, *rows, strict=False)]
    for row in (head, *rows):
        print(
            "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)).rstrip(), file=out
        )


def dump(data: Any, out: TextIO) -> None:
    """Indented JSON and a newline."""
    json.dump(data, out, indent=2)
    out.write("\n")


def history_lines(entries: list[HistoryEntry], audit: list[AuditEntry]) -> list[str]:
    """`sebridge history` for people: transitions and refused actions in one time order,
    each line `visible()`.

    Actions refused after their event ended changed nothing and decided nothing:
    they are one line per event at the end of its story, not the last word on it.
    """
    ended = {e.transition.event_id.lower(): e.at for e in entries if e.transition.kind in _ENDS}
    rows: list[tuple[datetime, int, list[str]]] = []
    late: dict[str, list[AuditEntry]] = {}
    for e in entries:
        rows.append((e.at, len(rows), _transition_lines(e)))
    for a in audit:
        end = ended.get(a.event_id.lower())
        if end is not None and a.at >= end:
            late.setdefault(a.event_id, []).append(a)
            continue
        line = f"{a.at:%Y-%m-%d %H:%M:%S} {a.action:<9} {a.event_id} by {a.actor} via {a.via}"
        rows.append((a.at, len(rows), [f"{line}: {a.detail}"]))
    for event_id, after in late.items():
        who = ", ".join(dict.fromkeys(f"{a.actor} via {a.via}" for a in after))
        last = after[-1].at
        rows.append(
            (
                last,
                len(rows),
                [
                    f"{last:%Y-%m-%d %H:%M:%S} {'late':<9} {event_id} {len(after)} refused after"
                    f" the event ended ({who}): nothing was done"
                ],
            )
        )
    rows.sort(key=lambda row: (row[0], row[1]))
    return [visible(line) for _, _, lines in rows for line in lines]


def _transition_lines(e: HistoryEntry) -> list[str]:
    sent = " ".join(f"{d.sink}:{d.state}" for d in e.deliveries) or "no sinks"
    lines = [f"{history_line(e)}  [{sent}]"]
    lines += [
        f"    {d.sink} ({d.attempts} attempts): {d.last_error}"
        for d in e.deliveries
        if d.last_error
    ]
    return lines


def not_yet(store: str | None) -> str:
    """What `events`, `history` and `approve` say before the daemon made its store (at
    `store`: cli/runtime.py missing_store)."""
    return (
        f"sebridge has not polled IMDS yet: there is no store at {store}"
        " (is `sebridge run` running?)"
    )


def as_stored(store: Store, typed: str) -> str:
    """The event id as stored, when `typed` is how `events` showed it (escaped: an id
    holding a control or a line break, kernel/text.py visible()); else `typed` as it is.
    `approve` and `hooks retry` take an id either way."""
    if store.events.get(typed) is not None:
        return typed
    shown = [r.event.event_id for r in store.events.current() if visible(r.event.event_id) == typed]
    return shown[0] if len(shown) == 1 else typed
