"""Jira sink: one issue per event, a comment per later transition, done when it ends.

The first transition creates the issue (summary and description from
templates/jira/), labelled `sebridge` and `sebridge-<event id>`; its key is
the Receipt. Before creating, the sink searches for that label and adopts
what it finds, so a lost store, a crash between create and commit or a
retry after a lost answer never makes a second issue. Every comment ends
with a marker naming its transition, so a retried comment is looked for
before it is posted again. Closing is the comment, then the done transition
by the id learnt from the process's first new issue (looked up again on the
issue when Jira refuses that id from its status).
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sebridge.integrations.jira.client import JiraApi, jql_string
from sebridge.integrations.jira.limits import SUMMARY_LIMIT, TEXT_LIMIT, fit
from sebridge.integrations.render import Renderer
from sebridge.integrations.samples import sample_messages
from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.errors import DeliveryError, PermanentDeliveryError
from sebridge.model import Receipt, TransitionKind
from sebridge.model.message import Message, shown, shown_field

if TYPE_CHECKING:
    from jira import JIRA

__all__ = ["LABEL", "JiraSink", "comment_marker", "event_label", "wiki"]

log = logging.getLogger(__name__)

SUMMARY, DESCRIPTION, COMMENT = "jira/summary.j2", "jira/description.j2", "jira/comment.j2"
LABEL = "sebridge"
# Cloud's search index lags a create by seconds: after a lost answer, look again this often.
LAG_WAITS = (1.0, 2.0, 3.0, 4.0)  # 10 s in all
_FIRST = (TransitionKind.SCHEDULED, TransitionKind.UNPLANNED)
_ENDS = (TransitionKind.COMPLETED, TransitionKind.CANCELLED)
_LABEL_SAFE = re.compile(r"[a-z0-9._-]{1,200}")  # an event id used in its label as it is
_WIKI = str.maketrans({c: "\\" + c for c in "{}[]|!*_^~+"})


def event_label(event_id: str) -> str:
    """The label naming an event's issue: `sebridge-<event id in lower case>`; for an id
    Jira would refuse in a label (spaces, odd characters, over 200 characters: IMDS may
    send anything), `sebridge-h<its SHA-256 in hex>`, the same for the stored id and the
    id a sink was shown (sink.shown_field)."""
    plain = shown_field(event_id).strip().lower()
    if _LABEL_SAFE.fullmatch(plain):
        return f"{LABEL}-{plain}"
    return f"{LABEL}-h{hashlib.sha256(plain.encode('utf-8')).hexdigest()}"


def comment_marker(kind: str, at: datetime) -> str:
    """The last line of each comment, naming its transition (how a retry finds it)."""
    return f"(sebridge: {kind} at {at.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%S.%fZ')})"


def wiki(value: object) -> str:
    """Text with Jira wiki markup's special characters escaped (REST v2 renders it)."""
    return ("" if value is None else str(value)).translate(_WIKI)


class JiraSink:
    """Creates, comments on and closes one Jira issue per event.

    Args:
        lag_waits: pauses between searches after a lost answer (Cloud's index lag).
    """

    def __init__(
        self,
        api: JiraApi,
        renderer: Renderer,
        *,
        lag_waits: Sequence[float] = LAG_WAITS,
        sleep: Callable[[float], None] = time.sleep,
        clock: Clock = utcnow,
    ) -> None:
        self._api = api
        self._s = api.settings
        self._renderer = renderer
        self._lag_waits = tuple(lag_waits)
        self._sleep = sleep
        self._clock = clock
        self._done_id: str | None = None  # the done transition's id that worked last
        renderer.add_filters(wiki=wiki)

    def send(self, message: Message) -> Receipt | None:
        """Create or adopt the event's issue; later, comment and close it."""
        message = shown(message)  # IMDS's text safe to show, each field within its limit
        t = message.transition
        key = _key(message.receipt)
        # An earlier attempt may have landed: its answer lost, or the daemon died between
        # the create and its commit (the dispatcher records attempts as begun).
        retried = message.maybe_sent
        context = self._context(message)
        marker = comment_marker(t.kind, t.at)
        # Every text first: a broken template changes nothing in Jira. Each within its
        # limit: a text Jira refuses would never arrive; the marker must (retries look).
        room = TEXT_LIMIT - len(marker) - 2
        body = f"{fit(self._render(COMMENT, context).strip(), room)}\n\n{marker}"
        if key is None:
            summary = self._summary(context)
            description = fit(self._render(DESCRIPTION, context), TEXT_LIMIT)
            key = self._find(t.event_id, wait=retried)
            if key is None:
                key = self._create(t.event_id, summary, description)
            else:
                log.info("jira: event %s already has issue %s: adopted", t.event_id, key)
                retried = True  # the issue was there: this comment may be there too
            if self._done_id is None:
                self._learn_done_id(key)
            if t.kind in _FIRST:
                return _receipt(key)
        if t.kind in _ENDS:
            self._close(key, body, marker, look_first=retried)
        else:
            self._comment(key, body, marker, look_first=retried)
        return _receipt(key)

    def check_templates(self) -> None:
        """Render every template against sample events at start-up; a failure names it."""
        for sample in sample_messages(
            description='Host update {code} [link|x] & "quotes"\nnew line'
        ):
            context = self._context(sample)
            self._summary(context)
            self._render(DESCRIPTION, context)
            self._render(COMMENT, context)

    def close(self) -> None:
        """Close the HTTP session."""
        self._api.close()

    # ---- the issue

    def _find(self, event_id: str, *, wait: bool) -> str | None:
        """The key of the event's issue, the oldest if there are several; None if none."""
        jql = (
            f"project = {jql_string(self._s.project)} AND labels = "
            f"{jql_string(event_label(event_id))} ORDER BY created ASC"
        )
        what = f"search {self._s.project} for the issue of event {event_id}"
        found = self._api.search(jql, what)
        # An earlier attempt may have created it with its answer lost; Cloud's search
        # sees a new issue only seconds later, so look again before creating another.
        # (Data Center indexes an issue as it is created.)
        lagging = wait and not found and self._api.deployment == "Cloud"
        for pause in self._lag_waits if lagging else ():
            if found:
                break
            self._sleep(pause)
            found = self._api.search(jql, what)
        return str(found[0]["key"]) if found else None

    def _create(self, event_id: str, summary: str, description: str) -> str:
        fields: dict[str, Any] = {
            "project": {"key": self._s.project},
            "issuetype": {"name": self._s.issue_type},
            "summary": summary,
            "description": description,
            "labels": [LABEL, event_label(event_id)],
        }
        what = f"create a {self._s.issue_type} in project {self._s.project}"
        issue = self._api.call(what, lambda jira: jira.create_issue(fields=fields, prefetch=False))
        return str(issue.key)

    def _comment(self, key: str, body: str, marker: str, *, look_first: bool) -> None:
        if look_first and marker in self._comments(key):
            return  # an earlier attempt's comment landed; its answer was lost
        self._api.call(f"comment on {key}", lambda jira: jira.add_comment(key, body))

    def _comments(self, key: str) -> str:
        def run(jira: JIRA) -> str:
            return "\n".join(str(c.body) for c in jira.comments(key))

        return self._api.call(f"read the comments of {key}", run)

    def _close(self, key: str, body: str, marker: str, *, look_first: bool) -> None:
        """Comment, then apply done_transition.

        The comment is its own request: Jira silently drops a comment sent with a
        transition that has no screen (most "Done" transitions). The transition's id
        is the one that worked last (one request: most workflows reach Done by one
        transition from every status); when there is none yet, or Jira refuses it from
        this issue's status, the issue's status and transitions are read and the id is
        looked up by name.
        """
        self._comment(key, body, marker, look_first=look_first)
        if self._done_id is not None:
            try:
                self._api.call(
                    f"move {key} with transition {self._s.done_transition!r}",
                    lambda jira: self._move(jira, key, self._done_id or ""),
                )
                return
            except PermanentDeliveryError:
                pass  # not valid from this status (400): look it up below
        issue: dict[str, Any] = self._api.call(
            f"read the status and transitions of {key}",
            lambda jira: jira.issue(key, fields="status", expand="transitions").raw,
        )
        status = (issue.get("fields") or {}).get("status") or {}
        transitions = issue.get("transitions") or []
        name = self._s.done_transition.casefold()
        # By the transition's name, or the name of the status it leads to.
        chosen = next((tr for tr in transitions if name in _names(tr)), None)
        if chosen is not None:
            self._api.call(
                f"move {key} with transition {self._s.done_transition!r}",
                lambda jira: self._move(jira, key, str(chosen["id"])),
            )
            self._done_id = str(chosen["id"])
            return
        if (status.get("statusCategory") or {}).get("key") == "done":
            return  # a person closed it already (or our earlier attempt did)
        offered = ", ".join(f'"{tr.get("name")}"' for tr in transitions) or "none"
        raise PermanentDeliveryError(
            f'jira: cannot close {key}: transition "{self._s.done_transition}" is not available '
            f'from its status "{status.get("name", "?")}" (available: {offered}); set '
            "jira.done_transition to one of them or add it to the workflow (the comment was added)"
        )

    def _learn_done_id(self, key: str) -> None:
        """Once per process: the done transition's id from a new issue's transitions,
        so that closing takes two requests (comment, transition), not three."""
        try:
            found: list[dict[str, Any]] = self._api.call(
                f"read the transitions of {key}", lambda jira: jira.transitions(key)
            )
        except DeliveryError as exc:
            log.debug("%s: looked up when the event ends instead", exc)
            return
        name = self._s.done_transition.casefold()
        chosen = next((tr for tr in found if name in _names(tr)), None)
        self._done_id = str(chosen["id"]) if chosen else None

    @staticmethod
    def _move(jira: JIRA, key: str, transition_id: str) -> None:
        jira.transition_issue(key, transition_id)

    # ---- text

    def _context(self, message: Message) -> dict[str, Any]:
        t, m = message.transition, message
        approved_by = t.actor if t.kind == TransitionKind.APPROVED and t.actor else m.approved_by
        now = self._clock()
        return dict(
            t=t,
            e=t.event,
            vm=m.vm_name,
            policy=m.policy,
            dry_run=m.dry_run or t.dry_run,
            approvable=m.approvable,
            approved_by=approved_by,
            anyway_approved=m.decider[2],
            approve_url=m.approve_url,
            approve_status=self._s.approve_status,
            now=now,
            readiness=m.readiness,
            prepare=m.prepare,
            rule=m.rule,
            decided=m.decided,
            held=m.held,
            next=m.outlook(now),
        )

    def _summary(self, context: dict[str, Any]) -> str:
        text = " ".join(self._render(SUMMARY, context).split())
        if not text:
            raise PermanentDeliveryError(f"jira: template {SUMMARY} produced an empty summary")
        return fit(text, SUMMARY_LIMIT)

    def _render(self, name: str, context: dict[str, Any]) -> str:
        return self._renderer.render_for("jira", name, **context)


def _names(transition: dict[str, Any]) -> tuple[str, str]:
    to = transition.get("to") or {}
    return str(transition.get("name", "")).casefold(), str(to.get("name", "")).casefold()


def _key(receipt: Receipt | None) -> str | None:
    if receipt is None:
        return None
    return receipt.data.get("key") or receipt.external_id or None


def _receipt(key: str) -> Receipt:
    return Receipt(external_id=key, data={"key": key})
