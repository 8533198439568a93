"""Approval from Jira: an issue moved to `approve_status` approves its event.

A scheduler job (every `[jira] poll_interval` seconds) runs one JQL search
for the issues of every open event, never one request per issue, and no
request at all while no event waits for approval. Each issue found is one
request to the approval use case, as from Slack or a link; the actor is the
person the changelog says moved the issue, else the issue key. An accepted
approval is told on the issue by the sink's "approved" comment (once IMDS
took it); a refused one is commented here, once (a marker in the comment
is looked for in what the search returned). A move on an event whose approval
is held (someone else's) is an approval attempt like any other: the use case
records it (a note every sink hears, `history` too: who, held, why, the ways
out), and the sink's comment on the issue says so, once: the note is keyed by
what it says, and the watcher does not ask again while nothing changed. The
approval a move itself made (held too, once the prepare hooks failed) is not
asked for again: its own `held` comment told the issue.
"""

from __future__ import annotations

import logging
from typing import Any

from sebridge.integrations.base import Host
from sebridge.integrations.jira.client import JiraApi, jql_string
from sebridge.integrations.jira.sink import LABEL, event_label
from sebridge.kernel.errors import DeliveryError
from sebridge.model.approval import OutcomeKind
from sebridge.model.approval_request import ApprovalRequest
from sebridge.model.records import EventRecord
from sebridge.model.services import Job

__all__ = ["VIA", "StatusWatcher", "actor_of"]

log = logging.getLogger(__name__)

VIA = "jira"
_REFUSED = "(sebridge: approval refused)"


def actor_of(issue: dict[str, Any], status: str) -> str:
    """Who last moved the issue to `status` by its changelog; else the issue key."""
    histories = (issue.get("changelog") or {}).get("histories") or []
    for history in sorted(histories, key=lambda h: str(h.get("created", "")), reverse=True):
        moved = any(
            item.get("field") == "status"
            and str(item.get("toString", "")).casefold() == status.casefold()
            for item in history.get("items") or ()
        )
        author = history.get("author") or {}
        name = author.get("displayName") or author.get("name") or author.get("accountId")
        if moved and name:
            return str(name)
    return str(issue.get("key", "?"))


class StatusWatcher:
    """Finds issues of open events in `approve_status` and approves their events.

    Also a Service, so the daemon closes its connection when it stops.
    """

    def __init__(self, api: JiraApi, host: Host, *, name: str = "jira-status") -> None:
        self._api = api
        self._name = name  # the job's, and its duty's in a fleet
        self._s = api.settings
        self._host = host
        self._refused: set[str] = set()  # issue keys already told why not
        # Issue keys whose move was asked for with the event's approval as it then was
        # (its state and why): not asked again every round while it stays so.
        self._asked: dict[str, tuple[str, str | None]] = {}
        self._failing = ""  # the last search error, logged once, not every round

    def job(self) -> Job:
        """The scheduler job: one search every poll_interval seconds."""
        # One agent of a fleet searches: N agents would each see and act on every match.
        return Job(self._name, self._s.poll_interval, self.run, single_holder=True)

    def start(self) -> None:
        """Nothing to start: the job connects on its first search."""

    def stop(self) -> None:
        """Close the watcher's HTTP session (the scheduler has stopped by now)."""
        self._api.close()

    def run(self) -> None:
        """One round: search (only when an event is open), approve, tell refusals."""
        waiting = {event_label(r.event.event_id): r for r in self._host.approvals.open_events()}
        if not waiting:
            return  # nothing to approve: ask Jira nothing
        labels = ", ".join(jql_string(label) for label in sorted(waiting))
        jql = (
            f"project = {jql_string(self._s.project)} AND labels = {LABEL} AND "
            f"status = {jql_string(self._s.approve_status)} AND labels in ({labels})"
        )
        try:
            issues = self._api.search(
                jql,
                f"search {self._s.project} for issues in status {self._s.approve_status!r}",
                fields=("labels", "status", "comment"),
                expand="changelog",
            )
        except DeliveryError as exc:
            if str(exc) != self._failing:
                log.warning("%s (will look again every %gs)", exc, self._s.poll_interval)
            self._failing = str(exc)
            return
        if self._failing:
            log.info("jira: the approval search works again")
            self._failing = ""
        for issue in issues:
            labels_of = (issue.get("fields") or {}).get("labels") or []
            record = next((waiting[x] for x in labels_of if x in waiting), None)
            if record is not None:
                self._approve(issue, record)
        # Only the issues still in the status are remembered (one moved back and forth is
        # a new attempt).
        found = {str(issue.get("key", "?")) for issue in issues}
        self._asked = {key: state for key, state in self._asked.items() if key in found}

    def _approve(self, issue: dict[str, Any], record: EventRecord) -> None:
        key = str(issue.get("key", "?"))
        event_id = record.event.event_id
        actor = actor_of(issue, self._s.approve_status)
        approval = record.approval
        if approval is not None and (approval.actor, approval.via) == (actor, VIA):
            return  # this move's own approval, held since: its `held` comment told the issue
        state = (approval.state, approval.last_error) if approval else ("", None)
        if self._asked.get(key) == state:
            return  # asked with the approval as it is now: told already
        outcome = self._host.approvals.request(ApprovalRequest(event_id, actor, VIA))
        if outcome.kind == OutcomeKind.REFUSED and outcome.blocker is not None:
            self._refuse(issue, key, outcome.reason)
        elif outcome.kind == OutcomeKind.HELD:
            self._asked[key] = state
            log.info(
                "approval of %s by %s via Jira issue %s held: %s",
                event_id,
                actor,
                key,
                outcome.reason,
            )
        elif outcome.kind != OutcomeKind.ALREADY:
            log.info(
                "event %s approved by %s via Jira issue %s: %s",
                event_id,
                actor,
                key,
                outcome.reason,
            )

    def _refuse(self, issue: dict[str, Any], key: str, why: str) -> None:
        comments = ((issue.get("fields") or {}).get("comment") or {}).get("comments") or []
        if key in self._refused or any(_REFUSED in str(c.get("body", "")) for c in comments):
            self._refused.add(key)
            return
        body = f"Not approved: {why}.\n\n{_REFUSED}"
        try:
            self._api.call(f"comment on {key}", lambda jira: jira.add_comment(key, body))
        except DeliveryError as exc:
            log.warning("%s (will try again in %gs)", exc, self._s.poll_interval)
            return
        self._refused.add(key)
        log.info("approval from Jira issue %s refused: %s", key, why)
