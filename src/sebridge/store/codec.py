"""Our own JSON for events and transitions in the store (snake_case, not IMDS's names)."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from sebridge.model import HookRun, Incarnation, ScheduledEvent, Transition
from sebridge.model.decision import ASK, Decision
from sebridge.model.leads import Lead

__all__ = [
    "decision_from_db",
    "decision_to_json",
    "event_digest",
    "event_from_dict",
    "event_to_dict",
    "from_iso",
    "incarnation_from_db",
    "incarnation_to_db",
    "iso",
    "transition_from_json",
    "transition_key",
    "transition_to_json",
]


def iso(moment: datetime) -> str:
    """Fixed-width UTC text, so stored times sort as text."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def from_iso(text: str) -> datetime:
    """The datetime `iso` wrote."""
    return datetime.fromisoformat(text)


def incarnation_to_db(incarnation: Incarnation) -> str:
    """DocumentIncarnation as JSON text (its columns are TEXT: the token is opaque)."""
    return json.dumps(incarnation)


def incarnation_from_db(value: str) -> Incarnation:
    """The inverse of incarnation_to_db."""
    token: Incarnation = json.loads(value)
    return token


def event_to_dict(event: ScheduledEvent) -> dict[str, Any]:
    """A ScheduledEvent as plain JSON-ready data."""
    return {
        "event_id": event.event_id,
        "event_type": event.event_type,
        "status": event.status,
        "resources": list(event.resources),
        "resource_type": event.resource_type,
        "not_before": iso(event.not_before) if event.not_before else None,
        "not_before_text": event.not_before_text,
        "description": event.description,
        "source": event.source,
        "duration_seconds": event.duration_seconds,
        "extra": dict(event.extra),
    }


def event_from_dict(data: dict[str, Any]) -> ScheduledEvent:
    """The inverse of event_to_dict."""
    not_before = data.get("not_before")
    return ScheduledEvent(
        event_id=data["event_id"],
        event_type=data["event_type"],
        status=data["status"],
        resources=tuple(data.get("resources", ())),
        resource_type=data.get("resource_type", ""),
        not_before=from_iso(not_before) if not_before else None,
        not_before_text=data.get("not_before_text"),
        description=data.get("description"),
        source=data.get("source"),
        duration_seconds=data.get("duration_seconds"),
        extra=MappingProxyType(dict(data.get("extra", {}))),
    )


def transition_to_json(transition: Transition) -> str:
    """A Transition as one JSON text (`actor_id` only when there is one)."""
    more = {"actor_id": transition.actor_id} if transition.actor_id else {}
    return json.dumps(
        {
            "kind": transition.kind,
            "at": iso(transition.at),
            "event": event_to_dict(transition.event),
            "changes": list(transition.changes),
            "actor": transition.actor,
            "via": transition.via,
            "dry_run": transition.dry_run,
            "note": transition.note,
            "hook": asdict(transition.hook) if transition.hook else None,
            "remind_before": transition.remind_before,
            "remind_after": transition.remind_after,
            "while_held": transition.while_held,
            "unreachable": [[lead.key, lead.seconds] for lead in transition.unreachable],
            **more,
        },
        separators=(",", ":"),
    )


# Each of these happens once in an event's life, whoever derives it.
_ONCE = frozenset(
    ("scheduled", "unplanned", "approved", "started", "started_unready", "completed", "cancelled")
)


def event_digest(event: ScheduledEvent) -> str:
    """What an event says (type, status, times, resources, text), as one short text."""
    text = json.dumps(event_to_dict(event), sort_keys=True, separators=(",", ":"))
    return _sha256(text)


def transition_key(transition: Transition) -> str:
    """What a transition says, as the third part of its unique key (event, kind, content).

    Lifecycle steps happen once per event: "". A change is keyed by the event's
    new content (the store adds which announcement it follows, so a change
    back to earlier content is said again); a note (taken, problem) by who and
    what. Hashed: an event's Resources can be long, an index entry cannot.
    """
    if transition.kind in _ONCE:
        return ""
    if transition.kind == "changed":
        return event_digest(transition.event)
    said: dict[str, Any] = {
        "actor": transition.actor,
        "via": transition.via,
        "note": transition.note,
    }
    if transition.hook is not None:  # one per run: hook, stage, VM and attempt
        run = transition.hook
        said["hook"] = [run.hook, run.stage, run.vm, run.attempt]
    # One per lead. A remind_after lead has a key of its own, so it never collides with
    # a remind lead of the same seconds; while_held is not part of it: a lead is said once,
    # whatever its approval's state when an agent recorded it.
    if transition.remind_before is not None:
        said["remind_before"] = transition.remind_before
    if transition.remind_after is not None:
        said["remind_after"] = transition.remind_after
    text = json.dumps(said, sort_keys=True, separators=(",", ":"))
    return _sha256(text)


def _sha256(text: str) -> str:
    # hashlib loads OpenSSL (several ms at start): loaded at the first event instead.
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def transition_from_json(text: str) -> Transition:
    """The inverse of transition_to_json."""
    data = json.loads(text)
    return Transition(
        kind=data["kind"],
        event=event_from_dict(data["event"]),
        at=from_iso(data["at"]),
        changes=tuple(data.get("changes", ())),
        actor=data.get("actor"),
        via=data.get("via"),
        dry_run=bool(data.get("dry_run", False)),
        note=data.get("note", ""),
        hook=HookRun(**data["hook"]) if data.get("hook") else None,
        remind_before=data.get("remind_before"),
        remind_after=data.get("remind_after"),
        while_held=bool(data.get("while_held", False)),
        unreachable=tuple(Lead(key, seconds) for key, seconds in data.get("unreachable", ())),
        actor_id=data.get("actor_id"),
    )


# Stores written before rules said "notify" where "ask" is meant (schema version 7
# converts them; a row an older agent of a fleet writes still may).
_OLD_ACTIONS = {"notify": ASK}


def decision_to_json(decision: Decision) -> str:
    """The events table's `decision` column. `notify` only when the rule routes: a
    decision without it reaches every instance not route_only (model/decision.py)."""
    data: dict[str, object] = {
        "action": decision.action,
        "rule": decision.rule,
        "prepare": list(decision.prepare),
        "recover": list(decision.recover),
        "remind": list(decision.remind),
        "remind_after": list(decision.remind_after),
        "on_prepare_failure": decision.on_prepare_failure,
    }
    if decision.notify is not None:
        data["notify"] = list(decision.notify)
    if decision.require_agents:  # absent: false (decisions stored before it existed)
        data["require_agents"] = True
    return json.dumps(data, separators=(",", ":"))


def decision_from_db(text: str, action: str) -> Decision:
    """The Decision `decision_to_json` wrote; from the `policy` column (the action) alone
    when the row has none (written by an agent older than rules)."""
    if not text:
        action = _OLD_ACTIONS.get(action, action)
        return Decision(action, "decided before policy rules")
    data = json.loads(text)
    return Decision(
        _OLD_ACTIONS.get(data["action"], data["action"]),
        data["rule"],
        prepare=tuple(data.get("prepare", ())),
        recover=tuple(data.get("recover", ())),
        remind=tuple(data.get("remind", ())),
        on_prepare_failure=data.get("on_prepare_failure", "hold"),
        # Absent from decisions stored before remind_after existed.
        remind_after=tuple(data.get("remind_after", ())),
        # Absent from decisions stored before routing: every instance not route_only.
        notify=tuple(data["notify"]) if "notify" in data else None,
        require_agents=bool(data.get("require_agents", False)),
    )
