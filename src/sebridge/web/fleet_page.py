"""The fleet page: `GET /fleet` (HTML), `GET /fleet.json`, and its forms (`POST /fleet`).

Every agent's events from the store (store/fleet_view.py), as web/fleet_rows.py
words them, filtered by `type`, `vm` (a shell pattern) and `state`. Who may see
it is the authenticating proxy's to say: a request from an address in `[web]
trusted_proxies` carrying `[web] user_header` names the person; any other is
401, and the header from any other address is not believed. The forms
(approve, approve anyway, retry) carry the event id and a CSRF token bound to
that person (web/fleet_tokens.py); approve and approve anyway are one request
to the approval use case, as from Slack, the approval link and the CLI, the
person as the actor and "page" as the channel; "Approve anyway" is confirmed by
a second POST, as on the approval page; retry is `sebridge hooks retry`'s
request. See docs/fleet-page.md and docs/ARCHITECTURE.md, "The fleet page".
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qs

from sebridge.integrations.render import Renderer
from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.wsgi import StartResponse
from sebridge.model.approval import OutcomeKind
from sebridge.model.approval_request import ApprovalRequest, Outcome
from sebridge.store.fleet_view import FleetRead, FleetView
from sebridge.store.hook_retries import RetryAnswer
from sebridge.web.approval_page import HEADERS, read_form
from sebridge.web.fleet_filters import STATES, bad_state, matches
from sebridge.web.fleet_rows import FleetEvent, FleetRows
from sebridge.web.fleet_tokens import FleetTokens

__all__ = ["PAGE", "PAGE_JSON", "VIA", "Access", "FleetPage"]

log = logging.getLogger(__name__)

PAGE, PAGE_JSON = "/fleet", "/fleet.json"
VIA = "page"  # the channel an approval from this page is recorded through
TEMPLATE, DONE = "web/fleet.html", "web/fleet_done.html"
MAX_PERSON = 200
_NOT_PRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")
_STATUS = {
    200: "200 OK",
    400: "400 Bad Request",
    401: "401 Unauthorized",
    403: "403 Forbidden",
    404: "404 Not Found",
    405: "405 Method Not Allowed",
    413: "413 Content Too Large",
}
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Access:
    """Who may see the page: the proxies' networks and the environ key of their header."""

    networks: tuple[Network, ...]
    header: str  # as WSGI's environ names it: HTTP_X_FORWARDED_USER

    def person(self, environ: dict[str, Any]) -> str | None:
        """The person the proxy named, or None: not from a trusted proxy, or no name."""
        try:
            peer = ipaddress.ip_address(str(environ.get("REMOTE_ADDR", "")).split("%")[0])
        except ValueError:
            return None
        if isinstance(peer, ipaddress.IPv6Address) and peer.ipv4_mapped is not None:
            peer = peer.ipv4_mapped
        if not any(peer in net for net in self.networks):
            return None  # the header from anywhere else is anyone's to write
        raw = str(environ.get(self.header, ""))
        # WSGI hands headers over as latin-1 text; a proxy sends UTF-8 names.
        name = raw.encode("latin-1", "replace").decode("utf-8", "replace")
        clean = " ".join(_NOT_PRINTABLE.sub(" ", name).split())[:MAX_PERSON]
        return clean or None


class FleetPage:
    """The WSGI app of /fleet and /fleet.json.

    Args:
        view: the store's fleet reads; rows: how they are worded.
        approve: the approval use case's request (Approvals.request).
        retry: asks for an event's failed prepare hooks to run again, for a person.
        recent_days: [web] recent_days.
        known_for: [fleet] known_for.
    """

    def __init__(
        self,
        view: FleetView,
        rows: FleetRows,
        renderer: Renderer,
        tokens: FleetTokens,
        access: Access,
        *,
        approve: Callable[[ApprovalRequest], Outcome],
        retry: Callable[[str, str], RetryAnswer],
        vm_name: Callable[[], str],
        recent_days: int,
        known_for: timedelta,
        clock: Clock = utcnow,
    ) -> None:
        self._view, self._rows, self._renderer = view, rows, renderer
        self._tokens, self._access = tokens, access
        self._approve, self._retry, self._vm_name = approve, retry, vm_name
        self._recent = timedelta(days=recent_days)
        self._recent_days = recent_days
        self._known_for = known_for
        self._clock = clock

    def check_templates(self) -> None:
        """Compile the page's templates now: a broken override fails at start-up."""
        for name in (TEMPLATE, DONE):
            self._renderer.load(name)

    def read(self) -> tuple[FleetRead, datetime]:
        """The store's events the page shows, read now (the calendar reads the same)."""
        now = self._clock()
        read = self._view.read(now, ended_since=now - self._recent, known_for=self._known_for)
        return read, now

    def rows(self) -> list[FleetEvent]:
        """Every event the page shows, as of now."""
        return self._rows.rows(*self.read())

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "")
        path = environ.get("PATH_INFO", "")
        allowed = ("GET", "HEAD", "POST") if path == PAGE else ("GET", "HEAD")
        if method not in allowed:
            return _plain(start_response, 405, "use " + ", ".join(allowed))
        person = self._access.person(environ)
        if person is None:
            return _plain(start_response, 401, "sign in through the proxy in front of sebridge")
        if method == "POST":
            status, body = self._post(person, environ)
            return _answer(start_response, status, body)
        query = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
        kind, vm, state = (query.get(k, "").strip() for k in ("type", "vm", "state"))
        problem = bad_state(state)
        rows = [] if problem else self.rows()
        shown = [r for r in rows if matches(r, kind=kind, vm=vm, state=state)]
        if path == PAGE_JSON:
            if problem:
                return _json(start_response, 400, {"error": problem})
            data = {"person": person, "events": [r.as_json() for r in shown]}
            return _json(start_response, 200, data, head=method == "HEAD")
        body = self._renderer.render(
            TEMPLATE,
            rows=shown,
            person=person,
            csrf=self._tokens.csrf(person),
            type=kind,
            vm_pattern=vm,
            state=state,
            states=STATES,
            problem=problem,
            recent_days=self._recent_days,
            vm=self._vm_name(),
            now=self._clock(),
        )
        return _answer(start_response, 400 if problem else 200, "" if method == "HEAD" else body)

    def _post(self, person: str, environ: dict[str, Any]) -> tuple[int, str]:
        form = read_form(environ)
        if form is None:
            return 413, "Content Too Large"
        if not self._tokens.csrf_ok(person, form.get("csrf_token", "")):
            return 403, "Forbidden: the form's csrf_token is missing, expired or not yours"
        event_id, action = form.get("event_id", "").strip(), form.get("action", "")
        if action not in ("approve", "anyway", "retry") or not event_id:
            return 400, "Bad Request: a form names an event_id and an action"
        row = self._row(event_id)
        if row is None:
            return 404, f"Not Found: unknown event {event_id}"
        if action == "retry":
            said, tone = self._retried(row, person)
        elif action == "anyway" and row.anyway and not form.get("confirm"):
            said = (
                f"Not every VM this event lists is ready. Approving anyway lets the"
                f" {row.record.event.event_type} start now on all of them, ready or not."
            )
            return 200, self._done(row, person, said, "bad", confirm=True)
        elif action == "anyway" and not row.anyway:  # carried out, started or gone since
            said, tone = "Approve anyway is not offered for this event now.", "warn"
        else:
            said, tone = self._approved(row, person, anyway=action == "anyway")
        return 200, self._done(self._row(event_id) or row, person, said, tone)

    def _approved(self, row: FleetEvent, person: str, *, anyway: bool) -> tuple[str, str]:
        outcome = self._approve(ApprovalRequest(row.id, person, VIA, anyway=anyway))
        how = "anyway " if anyway else ""
        if outcome.kind == OutcomeKind.APPROVED:
            log.info("approval %sof %s by %s through the fleet page", how, row.id, person)
            return f"Approved {how}by {person}: {outcome.reason}.", "ok"
        if outcome.kind == OutcomeKind.ALREADY:
            return f"Not approved again: {outcome.reason}.", "warn"
        if outcome.kind == OutcomeKind.HELD:
            return f"Recorded, not carried out: {outcome.reason}.", "warn"
        return f"Refused: {outcome.reason}.", "bad"

    def _retried(self, row: FleetEvent, person: str) -> tuple[str, str]:
        answer = self._retry(row.id, person)
        if answer.refused:
            return f"hooks retry refused: {answer.refused}.", "bad"
        what = ", ".join(f"{hook} on {vm}" for vm, hook in answer.runs)
        said = f"hooks retry requested by {person}: {what} will run again"
        if answer.released:
            said += "; the held approval is carried out once they succeed on every listed VM"
        return said + ".", "ok"

    def _row(self, event_id: str) -> FleetEvent | None:
        wanted = event_id.lower()
        return next((r for r in self.rows() if r.id.lower() == wanted), None)

    def _done(
        self, row: FleetEvent, person: str, said: str, tone: str, *, confirm: bool = False
    ) -> str:
        return self._renderer.render(
            DONE,
            row=row,
            said=said,
            tone=tone,
            confirm=confirm,
            csrf=self._tokens.csrf(person),
            person=person,
            vm=self._vm_name(),
            now=self._clock(),
        )


def _answer(start_response: StartResponse, status: int, body: str) -> list[bytes]:
    """An HTML page (200, or a page saying what was wrong), else a bare text answer."""
    data = body.encode("utf-8", "replace")
    headers = list(HEADERS)
    if not body.lstrip().startswith("<"):
        headers[0] = ("Content-Type", "text/plain; charset=utf-8")
    start_response(_STATUS[status], [*headers, ("Content-Length", str(len(data)))])
    return [data]


def _plain(start_response: StartResponse, status: int, text: str) -> list[bytes]:
    return _answer(start_response, status, f"{_STATUS[status][4:]}: {text}\n")


def _json(
    start_response: StartResponse, status: int, data: dict[str, Any], *, head: bool = False
) -> list[bytes]:
    body = json.dumps(data).encode()
    headers: Sequence[tuple[str, str]] = [
        ("Content-Type", "application/json"),
        ("Cache-Control", "no-store"),
        ("X-Content-Type-Options", "nosniff"),
        ("Content-Length", str(len(body))),
    ]
    start_response(_STATUS[status], list(headers))
    return [b"" if head else body]
