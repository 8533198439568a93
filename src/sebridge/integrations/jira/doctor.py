"""Jira's part of `sebridge check`: sign-in, project, issue type, workflow statuses.

Each check returns findings a person can act on; none raises for Jira's
answer, and the token never appears in one (JiraApi's errors are scrubbed).
A problem is named by the key to look at (jira.url, jira.pat or
jira.api_token, jira.project, jira.issue_type...) and says Jira's answer.
"""

from __future__ import annotations

from typing import Any

from sebridge.integrations.base import Finding
from sebridge.integrations.jira.client import JiraApi
from sebridge.kernel.errors import DeliveryError

__all__ = ["check_jira"]


def check_jira(api: JiraApi) -> list[Finding]:
    """myself, the project, its issue type, and the statuses sebridge names."""
    s = api.settings
    try:
        me: dict[str, Any] = api.call("sign in (myself)", lambda jira: jira.myself())
        kind = api.deployment
    except DeliveryError as exc:
        return [_problem(exc)]
    who = me.get("displayName") or me.get("name") or me.get("accountId") or "?"
    findings = [Finding("jira", True, f"signed in to {s.url} ({kind}) as {who}")]
    try:
        project = api.call(f"read project {s.project}", lambda jira: jira.project(s.project).raw)
    except DeliveryError as exc:
        return [
            *findings,
            _problem(exc, " (is jira.project the project's key?)"),
        ]
    findings.append(Finding("jira", True, f"project {s.project}: {project.get('name', '?')}"))
    types = [str(t.get("name")) for t in project.get("issueTypes") or ()]
    if s.issue_type.casefold() not in (t.casefold() for t in types):
        offered = ", ".join(f'"{t}"' for t in types) or "none"
        findings.append(
            Finding(
                "jira.issue_type",
                False,
                f'issue type "{s.issue_type}" is not in project {s.project} '
                f"(it has {offered}): set jira.issue_type to one of them",
            )
        )
        return findings
    findings.append(Finding("jira", True, f'issue type "{s.issue_type}" belongs to {s.project}'))
    try:
        per_type = api.call(
            f"read the workflow statuses of {s.project}",
            lambda jira: [t.raw for t in jira.issue_types_for_project(s.project)],
        )
    except DeliveryError as exc:
        return [*findings, _problem(exc)]
    statuses = next(
        (
            [str(st.get("name")) for st in t.get("statuses") or ()]
            for t in per_type
            if str(t.get("name", "")).casefold() == s.issue_type.casefold()
        ),
        [],
    )
    findings.append(_status("done_transition", s.done_transition, statuses, s.issue_type))
    if s.approve_status:
        findings.append(_status("approve_status", s.approve_status, statuses, s.issue_type))
    return findings


def _status(key: str, value: str, statuses: list[str], issue_type: str) -> Finding:
    if value.casefold() in (st.casefold() for st in statuses):
        return Finding(
            "jira", True, f'jira.{key} "{value}" is a status of the {issue_type} workflow'
        )
    offered = ", ".join(f'"{st}"' for st in statuses) or "none"
    hint = (
        " (a transition of that name also works: it is looked up by name on the issue)"
        if key == "done_transition"
        else ""
    )
    return Finding(
        f"jira.{key}",
        False,
        f'"{value}" is not a status of the {issue_type} workflow (statuses: {offered}){hint}',
    )


def _problem(exc: DeliveryError, hint: str = "") -> Finding:
    """Named by the key Jira's answer is about (jira.url, jira.pat...), saying it."""
    return Finding(exc.key or "jira", False, str(exc).removeprefix("jira: ") + hint)
