"""The approval page behind `/approve/{token}`: GET shows, POST approves (once).

GET never approves: chat unfurlers, mail scanners and link previews follow
links. It shows the event as a person needs it and one Approve button in a
form that POSTs back to the same URL. An event whose approval waits for its
VMs' prepare hooks or is held by a failed one shows what is not ready (a
failed hook's output tail) and "Approve anyway" instead: a first POST shows
a confirmation of what is not ready, and only the second (its `confirm`
field set) carries it out, as `sebridge approve --anyway` does. POST is one request to the approval
use case, as from Slack, Jira and the CLI (actor "approval link", plus the
name typed in the form), and the page shows its outcome once the carrier
is done with it: approved (what IMDS said), already approved (by whom and
when), gone or started, or held and why. Nothing more goes to IMDS on a
second POST. A token that is malformed, tampered with, expired or names an
unknown event gets a bare 403. Every answer forbids caching, referrers,
framing and any remote load.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, Protocol
from urllib.parse import parse_qs

import jinja2

from sebridge.approval.usecase import DEFAULT_WAIT
from sebridge.integrations.render import Renderer
from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.errors import ConfigError
from sebridge.kernel.redact import Masker
from sebridge.kernel.wsgi import StartResponse
from sebridge.model.approval import (
    BY_APPROVAL,
    Blocker,
    OutcomeKind,
    anyway_offered,
    would_hold,
)
from sebridge.model.approval_request import ApprovalRequest, Outcome
from sebridge.model.decision import offers_anyway
from sebridge.model.readiness import VmReadiness, VmState
from sebridge.model.records import EventRecord
from sebridge.model.wording.hooks import last_lines
from sebridge.model.wording.outlook import (
    decider,
    not_ready,
    outlook,
    ways,
    ways_out_of,
)
from sebridge.web.links import LinkError, LinkSigner

__all__ = ["PREFIX", "ApprovalPage", "PageHost", "link_actor"]

log = logging.getLogger(__name__)

PREFIX = "/approve/"
CONFIRM = "web/approve.html"
OUTCOME = "web/outcome.html"
# The VMs an approval waiting for readiness waits for (their prepare hooks not finished).
_BUSY = (VmState.WAITING, VmState.PREPARING, VmState.SILENT)
ANYWAY = "web/anyway.html"  # the confirmation of "Approve anyway" (the first of its two POSTs)
TAIL_LINES, TAIL_LIMIT = 10, 2000  # a failed hook's output shown on the page: its tail
MAX_FORM = 8 * 1024  # a few short fields and a button; anything bigger is not our form
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


class _Desk(Protocol):
    def request(self, req: ApprovalRequest, *, wait: float = ...) -> Outcome: ...

    def event(self, event_id: str) -> EventRecord | None: ...


class PageHost(Protocol):
    """What the page needs of the daemon: the approval use case and this VM's name."""

    @property
    def approvals(self) -> _Desk:
        """The approval use case."""
        ...

    def vm_name(self) -> str:
        """This VM's name, as IMDS's Resources spell it."""
        ...


def link_actor(name: str) -> str:
    """ "approval link", or "approval link (NAME)" with the name cleaned and shortened."""
    clean = " ".join(_NOT_PRINTABLE.sub(" ", name).split())[:MAX_NAME].strip()
    return f"approval link ({clean})" if clean else "approval link"


class ApprovalPage:
    """The WSGI app for the `/approve/` prefix route.

    Args:
        host: the daemon (the approval use case, this VM's name).
        dry_run: policy.dry_run, so the page says nothing went to IMDS.
        wait: how long a POST waits for the carrier before the page says "held".
        readiness_of: each listed VM's readiness and the rule's prepare hooks, by event id.
        mask: the secrets hook output must not show; masked where it was made already
            (hooks/process.py), and again here, where anyone with a link reads it.
    """

    def __init__(
        self,
        signer: LinkSigner,
        host: PageHost,
        renderer: Renderer,
        *,
        dry_run: bool = False,
        clock: Clock = utcnow,
        wait: float = DEFAULT_WAIT,
        readiness_of: Callable[[str], tuple[tuple[VmReadiness, ...], tuple[str, ...]]]
        | None = None,
        mask: Masker | None = None,
    ) -> None:
        self._readiness_of = readiness_of or (lambda event_id: ((), ()))
        self._mask = mask or Masker()
        self._signer = signer
        self._host = host
        self._renderer = renderer
        self._dry_run = dry_run
        self._clock = clock
        self._wait = wait

    def check_templates(self) -> None:
        """Load both pages now, so a broken override fails at start-up, not at 3 a.m."""
        for name in (CONFIRM, OUTCOME, ANYWAY):
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
            form = read_form(environ)
            if form is None:
                return _answer(start_response, 413, b"Content Too Large")
            status, body = self._post(record, form)
        else:
            status, body = self._show(record)
        return _answer(start_response, status, b"" if method == "HEAD" else body.encode())

    def _record(self, token: str) -> EventRecord | None:
        try:
            event_id = self._signer.verify(token)
        except LinkError:
            return None
        return self._host.approvals.event(event_id)

    def _show(self, record: EventRecord) -> tuple[int, str]:
        blocked = record.blocker(holding=self._holding(record))
        if blocked == Blocker.WOULD_HOLD:  # no Approve: what is not ready, retry, anyway
            return 200, self._page(OUTCOME, record, outcome="would_hold")
        if blocked is not None:
            return self._blocked(record, blocked)
        return 200, self._page(CONFIRM, record, outcome="confirm")

    def _holding(self, record: EventRecord) -> bool:
        """Its readiness would hold an approval (model/approval.py: would_hold)."""
        readiness, _ = self._readiness_of(record.event.event_id)
        return would_hold(readiness, record.decision.on_prepare_failure, record.policy)

    def _post(self, record: EventRecord, form: dict[str, str]) -> tuple[int, str]:
        """Approve; or, for "Approve anyway", first a page confirming what is not ready, and
        only the second POST (its confirm field set) carries it out."""
        if not form.get("anyway"):
            return self._approve(record, form.get("name", ""))
        if not _anyway(record, self._holding(record)):  # carried out, started or gone since
            return self._show(record)
        if not form.get("confirm"):
            return 200, self._page(ANYWAY, record, outcome="confirm")
        return self._approve(record, form.get("name", ""), anyway=True)

    def _approve(self, record: EventRecord, name: str, *, anyway: bool = False) -> tuple[int, str]:
        actor = link_actor(name)
        request = ApprovalRequest(record.event.event_id, actor, "link", anyway=anyway)
        outcome = self._host.approvals.request(request, wait=self._wait)
        fresh = outcome.record or record
        if outcome.kind == OutcomeKind.APPROVED:
            log.info("approval of %s by %s through its link", record.event.event_id, actor)
            return 200, self._page(OUTCOME, fresh, outcome="approved")
        if outcome.kind == OutcomeKind.ALREADY:
            return 200, self._page(OUTCOME, fresh, outcome="already")
        if outcome.blocker is not None:  # it started or left IMDS since the page was shown
            return self._blocked(fresh, outcome.blocker)
        # Held (IMDS has not taken it yet) or refused by IMDS: the page says which, and why.
        return 200, self._page(OUTCOME, fresh, outcome="approved")

    def _blocked(self, record: EventRecord, blocked: Blocker) -> tuple[int, str]:
        """The page for an event nobody can approve any more, or that has an approval
        (whatever became of it: the page says)."""
        if blocked in BY_APPROVAL:
            return 200, self._page(OUTCOME, record, outcome="already")
        if blocked == Blocker.STARTED:
            return 409, self._page(OUTCOME, record, outcome="started")
        return 410, self._page(OUTCOME, record, outcome="gone")

    def _page(self, template: str, record: EventRecord, *, outcome: str) -> str:
        readiness, prepare = self._readiness_of(record.event.event_id)
        # Only a valid link gets here (_record); what it shows of a hook's output is
        # bounded and masked, even to a template override that prints `v.output`.
        readiness = tuple(replace(v, output=self._tail(v.output)) for v in readiness)
        now = self._clock()
        approval = record.approval
        holding = would_hold(readiness, record.decision.on_prepare_failure, record.policy)
        anyway = _anyway(record, holding)
        later = outlook(
            record.event,
            approval=approval.state if approval else None,
            readiness=readiness,
            now=now,
            over=not record.present,
            holding=record.blocker(holding=holding) == Blocker.WOULD_HOLD,
        )
        held = later.held
        return self._renderer.render(
            template,
            readiness=readiness,
            prepare=prepare,
            anyway=anyway,
            unready=[(v.line(), v.output) for v in not_ready(readiness)],
            waiting_for=[v.line() for v in readiness if v.state in _BUSY],
            # The ways out (model/wording/outlook.py): a held event's two; Approve anyway alone
            # for one waiting for its hooks.
            ways=later.ways_out or (ways(record.event.event_id, held=False) if anyway else ()),
            ways_out=ways_out_of(record.event.event_id, readiness, held=held),
            outcome=outcome,
            record=record,
            e=record.event,
            approval=approval,
            who=decider(
                approval.actor,
                approval.via,
                record.decision.rule,
                anyway_by=approval.anyway_by,
                anyway_via=approval.anyway_via,
            )
            if approval
            else "",
            next=later,
            vm=self._host.vm_name(),
            dry_run=self._dry_run,
            now=now,
        )

    def _tail(self, output: str) -> str:
        return last_lines(self._mask.mask(output), lines=TAIL_LINES, limit=TAIL_LIMIT)


def _anyway(record: EventRecord, holding: bool) -> bool:
    """Whether the page offers "Approve anyway": the event's approval waits for its VMs'
    prepare hooks or is held by a failed one, or nobody approved it and one would only be
    held (`holding`; model/approval.py: anyway_offered)."""
    return offers_anyway(record.policy) and anyway_offered(
        approval=record.approval.state if record.approval else None,
        present=record.present,
        started=record.event.started,
        holding=holding,
    )


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


def read_form(environ: dict[str, Any]) -> dict[str, str] | None:
    """A page's POSTed form, each field its first value; None when the body is over
    MAX_FORM (the approval page's and the fleet page's forms are a few short fields)."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > MAX_FORM:
        return None
    body = environ["wsgi.input"].read(length) if length > 0 else b""
    try:
        fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=20)
    except ValueError:  # more fields than our forms have: not our form
        return {}
    return {key: str(values[0]) for key, values in fields.items() if values}
