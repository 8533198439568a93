"""`sebridge check --send-test` for Jira: what a test ticket would prove, without one.

A test issue would stay in the project (deleting needs a permission the bot
should not hold), so nothing is created: the account's own permissions in
the project are read (`mypermissions`): browse, create, comment, transition,
the four things sebridge does with an event's issue. `sebridge check` has
already read the project, the issue type and the workflow's statuses.
"""

from __future__ import annotations

from typing import Any

from sebridge.integrations.base import Finding, TrialNote
from sebridge.integrations.jira.client import JiraApi
from sebridge.kernel.errors import DeliveryError

__all__ = ["NEEDED", "send_trial"]

# Jira's permission keys, and how its permission scheme names them.
NEEDED = {
    "BROWSE_PROJECTS": "Browse Projects",
    "CREATE_ISSUES": "Create Issues",
    "ADD_COMMENTS": "Add Comments",
    "TRANSITION_ISSUES": "Transition Issues",
}


def send_trial(api: JiraApi, note: TrialNote) -> Finding:
    """The account's permissions in jira.project; no issue is created."""
    project = api.settings.project
    try:
        answer: dict[str, Any] = api.call(
            f"read your permissions in {project}",
            lambda jira: jira.my_permissions(projectKey=project, permissions=",".join(NEEDED)),
        )
    except DeliveryError as exc:
        said = str(exc).removeprefix("jira: ")
        return Finding(exc.key or "jira", False, f"no test issue created; {said}")
    held = answer.get("permissions") or {}
    missing = [
        name for key, name in NEEDED.items() if not (held.get(key) or {}).get("havePermission")
    ]
    if missing:
        return Finding(
            "jira.project",
            False,
            f"no test issue created; the account lacks {', '.join(missing)} in {project}:"
            " grant them in the project's permission scheme",
        )
    return Finding(
        "jira",
        True,
        f"no test issue created (it would stay in {project}); the account may browse {project},"
        " create issues, comment on and transition them",
    )
