"""What happened between two Scheduled Events documents, per EventId.

Pure: no I/O and no clock (``now`` is passed in), so the same two documents
always give the same transitions, in the same order.

Why by content, never by DocumentIncarnation alone: the incarnation only says
"something changed". A poll can miss steps (1 -> 3 holds two steps' worth of
change at once) and the same incarnation may come back with other content, so
every event is compared field by field (docs/ARCHITECTURE.md, "Event lifecycle").

Rules, per EventId (compared exactly as strings):

- New (in ``current`` only): Started -> UNPLANNED (a host failure, nothing to
  approve); any other status, unknown ones included -> SCHEDULED.
- In both: CHANGED when any of CHANGE_FIELDS moved (``changes`` names them, in
  CHANGE_FIELDS order), then STARTED when the status became Started. NotBefore
  is "" once started, so no NotBefore difference counts while the current event
  is Started. Started -> anything else emits nothing for the status (it should
  not happen), though field changes are still reported.
- Gone (in ``previous`` only): COMPLETED when it had started, was approved, or
  its NotBefore had passed (NotBefore <= now). A Reboot or Redeploy of this VM
  takes the daemon down with it, so Started is often never seen. Otherwise
  CANCELLED. The transition carries the event as last seen.

An event IMDS lists that sebridge cannot follow (``Document.unreadable``: its
EventId holds NUL or a lone surrogate) is a PROBLEM on its stand-in, once, when
first in ``current`` (the store records it only for a stand-in it did not hold
yet, so a restart or another agent never repeats it); it has no lifecycle.

Output: events in ``current`` order first, then gone events in ``previous``
order, then the unreadable ones. When an id appears twice in a document the first one counts, as in
`Document.event`.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sebridge.model import Document, ScheduledEvent, Transition, TransitionKind

__all__ = ["CHANGE_FIELDS", "diff"]

CHANGE_FIELDS: tuple[str, ...] = (
    "not_before",
    "resources",
    "description",
    "duration_seconds",
    "event_type",
)


def diff(
    previous: Document | None,
    current: Document,
    now: datetime,
    approved: Collection[str] = frozenset(),
) -> list[Transition]:
    """The transitions that take ``previous`` to ``current``, all stamped ``at=now``.

    Args:
        previous: the last document seen; None on the very first run.
        now: an aware UTC datetime, compared with NotBefore of gone events.
        approved: ids of the events we have approved (from the store).
    """
    before = _by_id(previous)
    after = _by_id(current)
    out: list[Transition] = []
    for event_id, event in after.items():
        old = before.get(event_id)
        if old is None:
            kind = TransitionKind.UNPLANNED if event.started else TransitionKind.SCHEDULED
            out.append(Transition(kind=kind, event=event, at=now))
            continue
        changes = _changed_fields(old, event)
        if changes:
            out.append(
                Transition(kind=TransitionKind.CHANGED, event=event, at=now, changes=changes)
            )
        if event.started and not old.started:
            out.append(Transition(kind=TransitionKind.STARTED, event=event, at=now))
    for event_id, old in before.items():
        if event_id not in after:
            done = (
                old.started
                or event_id in approved
                or (old.not_before is not None and old.not_before <= now)
            )
            kind = TransitionKind.COMPLETED if done else TransitionKind.CANCELLED
            out.append(Transition(kind=kind, event=old, at=now))
    known = {u.stand_in.event_id for u in previous.unreadable} if previous else set()
    for unreadable in current.unreadable:
        if unreadable.stand_in.event_id not in known:
            known.add(unreadable.stand_in.event_id)
            note = unreadable.note()
            out.append(Transition(TransitionKind.PROBLEM, unreadable.stand_in, now, note=note))
    return out


def _changed_fields(old: ScheduledEvent, new: ScheduledEvent) -> tuple[str, ...]:
    """Names from CHANGE_FIELDS whose values differ between two sightings of one event."""
    moved = {
        # NotBefore is "" once started: that is what Started looks like, not a change.
        "not_before": not new.started and _not_before_moved(old, new),
        # The same machines listed in another order are the same impact.
        "resources": sorted(old.resources) != sorted(new.resources),
        "description": old.description != new.description,
        "duration_seconds": old.duration_seconds != new.duration_seconds,
        "event_type": old.event_type != new.event_type,
    }
    return tuple(name for name in CHANGE_FIELDS if moved[name])


def _not_before_moved(old: ScheduledEvent, new: ScheduledEvent) -> bool:
    if old.not_before is not None or new.not_before is not None:
        # Times, not spellings: RFC 1123 and ISO 8601 of one instant are equal.
        return old.not_before != new.not_before
    # Neither is a readable time: compare the text, absent and "" alike.
    return (old.not_before_text or "").strip() != (new.not_before_text or "").strip()


def _by_id(document: Document | None) -> dict[str, ScheduledEvent]:
    events: dict[str, ScheduledEvent] = {}
    for event in document.events if document is not None else ():
        events.setdefault(event.event_id, event)
    return events
