"""Reminder leads: when an event is announced again, and which leads its notice can never reach.

A rule's `remind` counts back from NotBefore; its `remind_after` counts forward from
the moment the event was first announced (EventRecord.first_seen: "nobody answered in
10 minutes"). A lead can come only between that first announcement and NotBefore; one
that cannot (a 600 s `remind` for a Redeploy with 5 minutes' notice, a `remind_after`
past NotBefore) is said once, in the event's first message and by `policy explain`,
never dropped in silence. Pure: the reminders worker (engine/reminders.py: which lead
is due, lead_due), the recorder and explain ask these. See docs/ARCHITECTURE.md, "Reminders".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

__all__ = [
    "REMIND",
    "REMIND_AFTER",
    "Lead",
    "lead_due",
    "leads_of",
    "leads_words",
    "unreachable",
    "unreachable_line",
]

# The rule keys a lead comes from; a lead is named after its key everywhere (the
# decision, a JSON line, the store's transition key).
REMIND, REMIND_AFTER = "remind", "remind_after"


@dataclass(frozen=True, order=True)
class Lead:
    """One reminder's lead: `seconds` before NotBefore (key "remind") or after the event
    was first announced (key "remind_after")."""

    key: str
    seconds: int

    def moment(self, not_before: datetime | None, first_seen: datetime) -> datetime | None:
        """When the reminder is due; None when it has no moment (a `remind` lead of an
        event without NotBefore)."""
        if self.key == REMIND_AFTER:
            return first_seen + timedelta(seconds=self.seconds)
        return None if not_before is None else not_before - timedelta(seconds=self.seconds)

    def reachable(self, not_before: datetime | None, first_seen: datetime) -> bool:
        """Whether it can come: after the first announcement (which said everything up to
        then) and before NotBefore (when Azure starts the event)."""
        at = self.moment(not_before, first_seen)
        return at is not None and first_seen < at and (not_before is None or at < not_before)

    def words(self) -> str:
        """ "600 s before NotBefore", "600 s after it was first announced"."""
        return leads_words((self,))


_AFTER_WORDS = {REMIND: "before NotBefore", REMIND_AFTER: "after it was first announced"}


def leads_of(remind: Iterable[int], remind_after: Iterable[int]) -> tuple[Lead, ...]:
    """A decision's leads, both keys."""
    return (*(Lead(REMIND, s) for s in remind), *(Lead(REMIND_AFTER, s) for s in remind_after))


def leads_words(leads: Iterable[Lead]) -> str:
    """Leads for people, by key: "600 s, 180 s before NotBefore; 900 s after it was first
    announced"."""
    parts = []
    for key, after in _AFTER_WORDS.items():
        seconds = [f"{lead.seconds} s" for lead in leads if lead.key == key]
        if seconds:
            parts.append(f"{', '.join(seconds)} {after}")
    return "; ".join(parts)


def lead_due(
    leads: Iterable[Lead],
    not_before: datetime | None,
    first_seen: datetime,
    since: datetime | None,
    now: datetime,
) -> tuple[Lead | None, datetime | None]:
    """The lead whose reminder is due `now` (the latest passed), and when the next comes.

    Args:
        since: since when the event is reminded of (EventRecord.reminded_since); None:
            not now.
    """
    if since is None or (not_before is not None and now >= not_before):
        return None, None
    # A lead already passed at `since` is no reminder: the first announcement (or the hold)
    # said it (a 10-minute notice must not remind at 600 s a second later).
    due: list[tuple[datetime, Lead]] = []
    for lead in leads:
        at = lead.moment(not_before, first_seen)
        if at is not None and lead.reachable(not_before, first_seen) and at > since:
            due.append((at, lead))
    passed = [(at, lead) for at, lead in due if at <= now]
    coming = [at for at, _ in due if at > now]
    return (max(passed)[1] if passed else None), (min(coming) if coming else None)


def unreachable(
    leads: Iterable[Lead], not_before: datetime | None, first_seen: datetime
) -> tuple[Lead, ...]:
    """The leads an event first seen at `first_seen`, starting at `not_before`, can never
    reach."""
    return tuple(lead for lead in leads if not lead.reachable(not_before, first_seen))


def unreachable_line(
    leads: Iterable[Lead], not_before: datetime | None, first_seen: datetime
) -> str:
    """The one sentence every channel says of unreachable leads ("" when there are none):
    each lead, and the notice that rules it out."""
    said = leads_words(leads)
    if not said:
        return ""
    notice = None if not_before is None else int((not_before - first_seen).total_seconds())
    if notice is None:
        why = "it gives no NotBefore"
    elif notice <= 0:
        why = "NotBefore had come when it was first announced"
    else:
        why = f"NotBefore is {notice} s after it was first announced"
    return f"Reminders that can never come ({why}): {said}"
