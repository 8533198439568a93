"""[jira]: the section's keys and the checks that need more than their types."""

from __future__ import annotations

from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from sebridge.config.checks import http_url
from sebridge.config.durations import Seconds
from sebridge.config.reader import Reader, option
from sebridge.config.secrets import Secret

__all__ = ["JiraSettings", "validate"]

_UNSET = Secret()  # immutable: one default serves every secret


@dataclass(frozen=True)
class JiraSettings:
    """[jira]: enabled when url is set; Cloud with email + api_token, Data Center with pat."""

    # Your site, e.g. https://example.atlassian.net (Data Center: its base URL, context path
    # included): Jira is on when it is set.
    url: str = ""
    # Jira Cloud: the account the API token belongs to.
    email: str = ""
    # Jira Cloud: an API token of that account.
    api_token: Secret = _UNSET
    # Jira Data Center: a personal access token (instead of email and api_token).
    pat: Secret = _UNSET
    # The key of the project issues are created in; required when Jira is on.
    project: str = ""
    # The issue type of each event's issue (it must belong to the project).
    issue_type: str = "Task"
    # The transition (or its target status) applied when the event ends.
    done_transition: str = "Done"
    # An issue moved to this status approves its event; empty: off.
    approve_status: str = ""
    # Seconds between two searches for approved issues (one search for every open event).
    poll_interval: Seconds = option(
        10.0, ge=0.2, le=3600.0, why="seconds between approval searches"
    )

    @property
    def enabled(self) -> bool:
        return bool(self.url)

    @property
    def cloud(self) -> bool:
        """E-mail + API token (basic auth); otherwise a personal access token (bearer)."""
        return not self.pat


def validate(j: JiraSettings, rd: Reader) -> JiraSettings:
    """The URL, the project, and exactly one way to sign in."""
    if not j.url:
        if j.api_token or j.pat:
            rd.required("jira.url", f"when jira.{'pat' if j.pat else 'api_token'} is set")
        return j
    try:
        http_url(j.url, query=False)
        if urlsplit(j.url).username is not None:
            raise ValueError("must not carry a user or password: set email and api_token or pat")
    except ValueError as exc:
        rd.error("jira.url", str(exc))
    if not j.project:
        rd.required("jira.project", "when Jira is enabled (jira.url is set)")
    for key in ("issue_type", "done_transition"):
        if not getattr(j, key).strip():
            rd.required(f"jira.{key}", "when Jira is enabled (jira.url is set)")
    _check_sign_in(j, rd)
    return replace(j, url=j.url.rstrip("/"), approve_status=j.approve_status.strip())


_SIGN_IN = ("jira.email", "jira.api_token", "jira.pat")


def _check_sign_in(j: JiraSettings, rd: Reader) -> None:
    if j.pat and j.api_token:
        rd.problem(
            "jira: set email and api_token (Jira Cloud) or pat (Data Center), not both",
            about=_SIGN_IN,
        )
    elif j.pat and j.email:
        rd.warnings.append("jira.email is not used with jira.pat (Data Center signs in by token)")
    elif not j.pat:
        if not j.email and not j.api_token:
            why = rd.env.why_empty("jira.api_token") or rd.env.why_empty("jira.pat")
            rd.problem(
                f"jira: set email and api_token (Jira Cloud) or pat (Data Center){why}",
                about=_SIGN_IN,
            )
        elif not j.api_token:
            rd.required("jira.api_token", "with jira.email (or set jira.pat instead)")
        elif not j.email:
            rd.required("jira.email", "with jira.api_token")
