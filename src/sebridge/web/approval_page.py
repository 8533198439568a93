"""The approval page behind `/approve/{token}`: GET shows, POST approves (once).

GET never approves: chat unfurlers, mail scanners and link previews follow
links. It shows the event as a person needs it and one Approve button in a
form that POSTs back to the same URL. POST approves through the same
`Approver.approve()` as Slack and the CLI (actor "approval link", plus the
name typed in the form), carries the approval out at once and shows what
IMDS said. A second POST finds the stored approval and says who approved and
when; nothing more goes to IMDS. A token that is malformed, tampered with,
expired or names an unknown event gets a bare 403. Every answer forbids
caching, referrers, framing and any remote load.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

import jinja2

from sebridge.errors import ApprovalError, ConfigError
from sebridge.integrations.base import Host, StartResponse
from sebridge.links import LinkError, LinkSigner
from sebridge.render import Renderer
from sebridge.store import EventRecord

__all__ = ["PREFIX", "ApprovalPage", "link_actor"]

log = logging.getLogger(__name__)

PREFIX = "/approve/"
CONFIRM = "web/approve.html"
OUTCOME = "web/outcome.html"
MAX_FORM = 8 * 1024  # a name field and a button; anything bigger is not our form
MAX_NAME = 60
HEADERS = [
    ("Content-Type", "text/html; charset=utf-8"),
    ("Cache-Control", "no-store"),
    ("Referrer-Policy", "no-referrer"),
    (
        "Content-Security-Policy",
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
]
_STATUS = {
    200: "200 OK",
    403: "403 Forbidden",
    405: "405 Method Not Allowed",
    409: "409 Conflict",
    410: "410 Gone",
    413: "413 Content Too Large",
}
_NOT_PRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")


def link_actor(name: str) -> str:
    """ "approval link", or "approval link (NAME)" with the name cleaned and shortened."""
    clean = " ".join(_NOT_PRINTABLE.sub(" ", name).split())[:MAX_NAME].strip()
    return f"approval link ({clean})" if clean else "approval link"


class ApprovalPage:
    """The WSGI app for the `/approve/` prefix route.

    Args:
        host: the daemon (store, approver, this VM's name, carrying approvals out).
        dry_run: policy.dry_run, so the page says nothing went to IMDS.
    """

    def __init__(
        self,
        signer: LinkSigner,
        host: Host,
        renderer: Renderer,
        *,
        dry_run: bool = False,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._signer = signer
        self._host = host
        self._renderer = renderer
        self._dry_run = dry_run
        self._clock = clock

    def check_templates(self) -> None:
        """Load both pages now, so a broken override fails at start-up, not at 3 a.m."""
        for name in (CONFIRM, OUTCOME):
            try:
                self._renderer.load(name)
            except jinja2.TemplateError as exc:
                line = getattr(exc, "lineno", None)
                where = f" line {line}" if line else ""
                raise ConfigError(f"approval page: template {name}{where}: {exc}") from None

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "")
        if method not in ("GET", "HEAD", "POST"):
            return _answer(start_response, 405, b"Method Not Allowed", [("Allow", "GET, POST")])
        record = self._record(environ.get("PATH_INFO", "")[len(PREFIX) :])
        if record is None:
            return _answer(start_response, 403, b"Forbidden")
        if method == "POST":
            name = self._form_name(environ)
            if name is None:
                return _answer(start_response, 413, b"Content Too Large")
            status, body = self._approve(record, name)
        else:
            status, body = self._show(record)
        return _answer(start_response, status, b"" if method == "HEAD" else body.encode())

    def _record(self, token: str) -> EventRecord | None:
        try:
            event_id = self._signer.verify(token)
        except LinkError:
            return None
        return self._host.store.event(event_id)

    def _show(self, record: EventRecord) -> tuple[int, str]:
        ended = self._ended(record)
        if ended is not None:
            return ended
        return 200, self._page(CONFIRM, record, outcome="confirm")

    def _approve(self, record: EventRecord, name: str) -> tuple[int, str]:
        ended = self._ended(record)
        if ended is not None:
            return ended
        actor = link_actor(name)
        try:
            _, new = self._host.approver.approve(record.event.event_id, actor, "link")
        except ApprovalError:  # it started or left IMDS since we looked
            fresh = self._host.store.event(record.event.event_id) or record
            return self._ended(fresh) or (410, self._page(OUTCOME, fresh, outcome="gone"))
        if not new:
            return self._already(record)
        log.info("approval of %s by %s through its link", record.event.event_id, actor)
        self._host.carry_out_approvals()
        fresh = self._host.store.event(record.event.event_id) or record
        return 200, self._page(OUTCOME, fresh, outcome="approved")

    def _ended(self, record: EventRecord) -> tuple[int, str] | None:
        """The page for an event nobody can approve any more (or approved already), else None."""
        if record.approval is not None:
            return self._already(record)
        if not record.present:
            return 410, self._page(OUTCOME, record, outcome="gone")
        if record.event.started:
            return 409, self._page(OUTCOME, record, outcome="started")
        return None

    def _already(self, record: EventRecord) -> tuple[int, str]:
        fresh = self._host.store.event(record.event.event_id) or record
        return 200, self._page(OUTCOME, fresh, outcome="already")

    def _page(self, template: str, record: EventRecord, *, outcome: str) -> str:
        return self._renderer.render(
            template,
            outcome=outcome,
            record=record,
            e=record.event,
            approval=record.approval,
            vm=self._host.vm_name(),
            dry_run=self._dry_run,
            now=self._clock(),
        )

    @staticmethod
    def _form_name(environ: dict[str, Any]) -> str | None:
        """The form's name field ("" if absent); None when the body is too large."""
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > MAX_FORM:
            return None
        body = environ["wsgi.input"].read(length) if length > 0 else b""
        try:
            fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=20)
        except ValueError:  # more fields than our form has: not our form
            return ""
        return str((fields.get("name") or [""])[0])


def _answer(
    start_response: StartResponse,
    status: int,
    body: bytes,
    extra: list[tuple[str, str]] | None = None,
) -> list[bytes]:
    headers = list(HEADERS)
    if status >= 400 and status not in (409, 410):  # bare answers: no page, no detail
        headers[0] = ("Content-Type", "text/plain; charset=utf-8")
    start_response(_STATUS[status], [*headers, ("Content-Length", str(len(body))), *(extra or [])])
    return [body]
