"""`GET /calendar/<token>.ics`: the fleet's maintenance as a calendar feed (RFC 5545).

Calendar apps subscribe to a URL and poll it; they cannot sign in, so the URL
carries its own token (web/fleet_tokens.py: an HMAC of the link key; a wrong
one is a bare 404, compared in constant time). One VEVENT per event the fleet
page shows (web/fleet_rows.py), built with the `icalendar` library: UID
`<event id>@sebridge`, DTSTART NotBefore (a started event's: when it started),
DTEND NotBefore plus DurationInSeconds (unknown: 15 min), SUMMARY "Reboot:
web1, web2 (ask)", DESCRIPTION its state, decision and approval and a link to
the page (nothing relative to now), STATUS CANCELLED once it left IMDS without
starting, SEQUENCE and LAST-MODIFIED from its transitions (each change of its
record is one), so a calendar updates the entry in place. Each VEVENT is
written once per content and kept (Calendars). See docs/fleet-page.md.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from icalendar import Calendar, Event

from sebridge.kernel.text import displayable
from sebridge.kernel.wsgi import StartResponse
from sebridge.model.title import title_vms
from sebridge.store.fleet_view import FleetRead
from sebridge.web.fleet_rows import FleetEvent, FleetRows, inputs
from sebridge.web.fleet_tokens import FleetTokens

__all__ = ["PREFIX", "UNKNOWN_DURATION", "CalendarFeed", "Calendars"]

PREFIX = "/calendar/"
UNKNOWN_DURATION = timedelta(minutes=15)
REFRESH = timedelta(minutes=5)  # what the feed asks of a calendar app (RFC 7986)


@dataclass(frozen=True)
class _Entry:
    """What one VEVENT says: all of it, so equal entries make equal bytes (cached)."""

    uid: str
    start: datetime
    end: datetime
    summary: str
    description: str
    status: str
    sequence: int
    modified: datetime
    url: str


def _entry(row: FleetEvent, page_url: str) -> _Entry:
    r, e = row.record, row.record.event
    start = row.not_before or r.first_seen
    seconds = e.duration_seconds
    length = timedelta(seconds=seconds) if seconds is not None and seconds > 0 else UNKNOWN_DURATION
    return _Entry(
        uid=f"{e.event_id}@sebridge",
        start=start,
        end=start + length,
        summary=_text(f"{e.event_type}: {title_vms(e.resources)} ({r.policy})"),
        description=_text("\n".join(_description(row, page_url))),
        status="CANCELLED" if r.state == "cancelled" else "CONFIRMED",
        sequence=row.changes.count,
        modified=row.changes.last,
        url=f"{page_url}#{e.event_id}" if page_url else "",
    )


def _vevent(entry: _Entry) -> bytes:
    """One VEVENT, as icalendar writes it. DTSTAMP is when the store's record of the event
    last changed (RFC 5545: for a feed without METHOD, when the information was last
    revised), so a VEVENT is the same bytes until the event changes."""
    vevent = Event()
    vevent.add("uid", entry.uid)
    vevent.add("dtstamp", entry.modified)
    vevent.add("dtstart", entry.start)
    vevent.add("dtend", entry.end)
    vevent.add("summary", entry.summary)
    vevent.add("description", entry.description)
    vevent.add("status", entry.status)
    vevent.add("sequence", entry.sequence)
    vevent.add("last-modified", entry.modified)
    vevent.add("transp", "TRANSPARENT")  # maintenance, not a meeting: nobody is busy
    if entry.url:
        vevent.add("url", entry.url)
    data: bytes = vevent.to_ical()
    return data


def _wrapper() -> tuple[bytes, bytes]:
    """The VCALENDAR around the events, as icalendar writes it: (its head, its end)."""
    cal = Calendar()
    cal.add("prodid", "-//sebridge//fleet maintenance//EN")
    cal.add("version", "2.0")
    cal.add("x-wr-calname", "Azure maintenance (sebridge)")
    cal.add("refresh-interval", REFRESH, parameters={"VALUE": "DURATION"})
    whole: bytes = cal.to_ical()
    end = b"END:VCALENDAR\r\n"
    assert whole.endswith(end)
    return whole[: -len(end)], end


def _description(row: FleetEvent, page_url: str) -> list[str]:
    """State, decision, approval, the VMs and what is not ready: nothing relative to now
    ("in 12 min"), which would change the VEVENT at every poll; DTSTART says when."""
    r, e = row.record, row.record.event
    lines = [
        f"State: {r.state}{'' if r.present else ' (left IMDS)'}{', held' if row.held else ''}",
        f"Decision: {row.decided}",
        f"Approval: {row.approved_by + ' (' + r.approval.state + ')' if r.approval else 'nobody'}",
        f"VMs: {', '.join(f'{v.vm} (agent {v.agent})' for v in row.vms) or 'none listed'}",
    ]
    if row.next.not_ready:
        lines.append("Not ready: " + "; ".join(row.next.not_ready))
    lines += [f"Way out: {command} ({what})" for command, what in row.next.ways_out]
    if e.description:
        lines.append(e.description)
    lines.append(f"Event: {e.event_id}")
    if page_url:
        lines.append(f"Page: {page_url}#{e.event_id}")
    return lines


def _text(text: str) -> str:
    """IMDS's text as a calendar can hold it: lone surrogates (which UTF-8 cannot) replaced."""
    return displayable(text)


class Calendars:
    """Writes feeds, each event's entry worked out and written once per what it says:
    icalendar takes about a millisecond a VEVENT and a row's wording about a tenth of
    that, and calendar apps poll (bench/fleet_page.py). An event whose inputs (what the
    store holds of it and its VMs' agents: web/fleet_rows.py inputs) are unchanged
    keeps its bytes."""

    def __init__(self, rows: FleetRows, page_url: str = "") -> None:
        self._rows = rows
        self._page_url = page_url
        self._head, self._end = _wrapper()
        self._written: dict[str, tuple[object, _Entry, bytes]] = {}
        self._lock = threading.Lock()

    def feed(self, read: FleetRead, now: datetime) -> bytes:
        """The feed of the events `read` holds, as of `now` (RFC 5545)."""
        fleet = self._rows.fleet(read, now)
        with self._lock:
            before, written = self._written, {}
            for record in read.events:
                key = inputs(record, read, fleet)
                kept = before.get(record.event.event_id)
                if kept is not None and key is not None and kept[0] == key:
                    written[record.event.event_id] = kept
                    continue
                entry = _entry(self._rows.row(record, read, fleet, now), self._page_url)
                same = kept is not None and kept[1] == entry
                data = kept[2] if kept is not None and same else _vevent(entry)
                written[record.event.event_id] = (key, entry, data)
            self._written = written  # events no longer shown are let go
        return b"".join([self._head, *(data for _, _, data in written.values()), self._end])


class CalendarFeed:
    """The WSGI app of the `/calendar/` prefix route."""

    def __init__(
        self,
        read: Callable[[], tuple[FleetRead, datetime]],
        rows: FleetRows,
        tokens: FleetTokens,
        *,
        page_url: str = "",
    ) -> None:
        self._read, self._tokens = read, tokens
        self._calendars = Calendars(rows, page_url)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "")
        if method not in ("GET", "HEAD"):
            start_response("405 Method Not Allowed", [("Allow", "GET, HEAD")])
            return [b""]
        name = environ.get("PATH_INFO", "")[len(PREFIX) :]
        token = name.removesuffix(".ics")
        if not name.endswith(".ics") or not self._tokens.calendar_ok(token):
            start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
            return [b"no such path\n"]
        body = self._calendars.feed(*self._read())
        start_response(
            "200 OK",
            [
                ("Content-Type", "text/calendar; charset=utf-8"),
                ("Content-Length", str(len(body))),
                ("Cache-Control", "no-store"),
                ("Referrer-Policy", "no-referrer"),
            ],
        )
        return [b"" if method == "HEAD" else body]
