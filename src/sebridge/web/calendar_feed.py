"""`GET /calendar/<token>.ics`: the fleet's maintenance as a calendar feed (RFC 5545).

Calendar apps subscribe to a URL and poll it; they cannot sign in, so the URL
carries its own token (web/fleet_tokens.py: an HMAC of the link key; a wrong
one is a bare 404, compared in constant time). One VEVENT per event the fleet
page shows (web/fleet_rows.py), built with the `icalendar` library: UID
`<event id>@sebridge`, DTSTART NotBefore (a started event's: when it started),
DTEND NotBefore plus DurationInSeconds (unknown: 15 min), SUMMARY "Reboot:
web1, web2 (ask)", DESCRIPTION its state, decision and approval and a link to
the page, STATUS CANCELLED once it left IMDS without starting, SEQUENCE and
LAST-MODIFIED from its transitions (each change of its record is one), so a
calendar updates the entry in place. See docs/fleet-page.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from icalendar import Calendar, Event

from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.text import displayable
from sebridge.kernel.wsgi import StartResponse
from sebridge.model.title import title_vms
from sebridge.web.fleet_rows import FleetEvent
from sebridge.web.fleet_tokens import FleetTokens

__all__ = ["PREFIX", "UNKNOWN_DURATION", "CalendarFeed", "calendar"]

PREFIX = "/calendar/"
UNKNOWN_DURATION = timedelta(minutes=15)
REFRESH = timedelta(minutes=5)  # what the feed asks of a calendar app (RFC 7986)


def calendar(rows: Sequence[FleetEvent], now: datetime, page_url: str = "") -> bytes:
    """The feed of `rows`, as of `now`; `page_url`: the fleet page's address ("": none)."""
    cal = Calendar()
    cal.add("prodid", "-//sebridge//fleet maintenance//EN")
    cal.add("version", "2.0")
    cal.add("x-wr-calname", "Azure maintenance (sebridge)")
    cal.add("refresh-interval", REFRESH, parameters={"VALUE": "DURATION"})
    for row in rows:
        cal.add_component(_vevent(row, now, page_url))
    feed: bytes = cal.to_ical()
    return feed


def _vevent(row: FleetEvent, now: datetime, page_url: str) -> Event:
    r, e = row.record, row.record.event
    start = row.not_before or r.first_seen
    seconds = e.duration_seconds
    length = timedelta(seconds=seconds) if seconds is not None and seconds > 0 else UNKNOWN_DURATION
    vevent = Event()
    vevent.add("uid", f"{e.event_id}@sebridge")
    vevent.add("dtstamp", now)
    vevent.add("dtstart", start)
    vevent.add("dtend", start + length)
    vevent.add("summary", _text(f"{e.event_type}: {title_vms(e.resources)} ({r.policy})"))
    vevent.add("description", _text("\n".join(_description(row, page_url))))
    vevent.add("status", "CANCELLED" if r.state == "cancelled" else "CONFIRMED")
    vevent.add("sequence", row.changes.count)
    vevent.add("last-modified", row.changes.last)
    vevent.add("transp", "TRANSPARENT")  # maintenance, not a meeting: nobody is busy
    if page_url:
        vevent.add("url", f"{page_url}#{e.event_id}")
    return vevent


def _description(row: FleetEvent, page_url: str) -> list[str]:
    r, e = row.record, row.record.event
    lines = [
        f"State: {r.state}{'' if r.present else ' (left IMDS)'}{', held' if row.held else ''}",
        f"Decision: {row.decided}",
        f"Approval: {row.approved_by + ' (' + r.approval.state + ')' if r.approval else 'nobody'}",
        f"VMs: {', '.join(f'{v.vm} (agent {v.agent})' for v in row.vms) or 'none listed'}",
    ]
    lines += row.next.lines()
    if e.description:
        lines.append(e.description)
    lines.append(f"Event: {e.event_id}")
    if page_url:
        lines.append(f"Page: {page_url}#{e.event_id}")
    return lines


def _text(text: str) -> str:
    """IMDS's text as a calendar can hold it: lone surrogates (which UTF-8 cannot) replaced."""
    return displayable(text)


class CalendarFeed:
    """The WSGI app of the `/calendar/` prefix route."""

    def __init__(
        self,
        rows: Callable[[], list[FleetEvent]],
        tokens: FleetTokens,
        *,
        page_url: str = "",
        clock: Clock = utcnow,
    ) -> None:
        self._rows, self._tokens, self._page_url, self._clock = rows, tokens, page_url, clock

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
        body = calendar(self._rows(), self._clock(), self._page_url)
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
