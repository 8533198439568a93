"""Checks for config.py beyond types: formats of single values and keys together.

`check()` runs once the types are right; it reports to the Reader, adds
warnings, and returns the Config with some values normalised. Each value
check returns the normalised value or raises ValueError with a message
that completes "<key>: ...". A value is quoted back only when it cannot carry
a credential (no user info, no query string); webhook URLs and store URLs
are never quoted back.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING
from urllib.parse import SplitResult, urlsplit, urlunsplit

from sebridge.config_reader import Reader

if TYPE_CHECKING:
    from sebridge.config import Config, JiraConfig, SlackConfig

__all__ = [
    "check",
    "endpoint",
    "http_url",
    "listen",
    "on_temp_disk",
    "redact_url",
    "slack_token_kind",
    "store_url",
    "webhook_url",
]

SLACK_ID = re.compile(r"[UWS][A-Z0-9]{2,}")
_LISTEN = re.compile(r"\[([^\]]+)\]:(\d{1,5})|([^\s:\[\]/]+):(\d{1,5})")
_LOCALHOSTS = ("127.0.0.1", "localhost", "::1")
_SQLITE_HELP = "sqlite:////absolute/path.db, sqlite:///relative/path.db or sqlite:// (in memory)"
# Token prefixes are not secret; naming the kind helps a person who pasted the wrong one.
_SLACK_TOKEN_KINDS = (
    ("xoxe.xoxb-", "a rotating bot token (xoxe.xoxb-...), which expires after 12 hours"),
    ("xoxe.xoxp-", "a rotating user token (xoxe.xoxp-...)"),
    ("xoxb-", "a bot token (xoxb-...)"),
    ("xapp-", "an app-level token (xapp-...)"),
    ("xoxp-", "a user token (xoxp-...)"),
    ("xoxa-", "a workspace app token (xoxa-...)"),
    ("xoxe-", "a refresh token (xoxe-...)"),
    ("xoxs-", "a session token (xoxs-...)"),
)


def _got(value: str) -> str:
    return "" if "@" in value or "?" in value else f', got "{value}"'


def _split_http(value: str, *, show: bool = True) -> SplitResult:
    got = _got(value) if show else ""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        raise ValueError(f"is not a valid URL{got}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"must be an http:// or https:// URL{got}")
    return parts


def endpoint(value: str) -> str:
    """IMDS base URL: http(s)://host[:port], no path; returned without a trailing slash."""
    parts = _split_http(value)
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise ValueError(
            f"must be scheme://host[:port] without a path (sebridge adds the path){_got(value)}"
        )
    return value.rstrip("/")


def http_url(value: str, *, query: bool = True) -> str:
    """An http(s) URL with a host; with `query=False` also no query or fragment."""
    parts = _split_http(value)
    if not query and (parts.query or parts.fragment):
        raise ValueError("must not have a query string or fragment")
    return value


def webhook_url(value: str) -> str:
    """An https URL (http only to localhost, for tests). Never quoted back: it is a secret."""
    parts = _split_http(value, show=False)
    if parts.scheme != "https" and parts.hostname not in _LOCALHOSTS:
        raise ValueError("must be an https:// URL (http:// is accepted only for localhost)")
    return value


def listen(value: str) -> tuple[str, int]:
    """Parse host:port (IPv6 as [::1]:8787) into (host, port)."""
    match = _LISTEN.fullmatch(value)
    if match is None:
        raise ValueError(f'must be host:port (IPv6 as [::1]:8787), got "{value}"')
    host = match.group(1) or match.group(3)
    port = int(match.group(2) or match.group(4))
    if match.group(1):
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f'"{host}" in brackets is not an IPv6 address') from None
    if port > 65535:
        raise ValueError(f"port {port} is out of range 0-65535")
    return host, port


def store_url(value: str) -> tuple[str, str]:
    """Return (backend, sqlite path): ("sqlite", path or ":memory:") or ("postgresql", "")."""
    if value in ("sqlite://", "sqlite:///:memory:"):
        return "sqlite", ":memory:"
    if value.startswith("sqlite:///") and len(value) > len("sqlite:///"):
        return "sqlite", value[len("sqlite:///") :]
    if value.startswith("sqlite:"):
        raise ValueError(f'must be {_SQLITE_HELP}, got "{value}"')
    if value.startswith(("postgresql://", "postgres://")):
        return "postgresql", ""
    scheme, sep, _ = value.partition("://")
    got = f'a URL with scheme "{scheme}"' if sep else f'"{value}"'
    raise ValueError(f"must be {_SQLITE_HELP} or postgresql://user@host/db, got {got}")


def on_temp_disk(path: str) -> bool:
    """Whether a file path is on Azure's temporary disk (/mnt, D:), wiped by Redeploy/Preempt."""
    path = path.replace("\\", "/")
    return path == "/mnt" or path.startswith("/mnt/") or path[:2].lower() == "d:"


def redact_url(value: str) -> str:
    """The URL with any password and query string replaced by "***"."""
    try:
        parts = urlsplit(value)
        netloc = parts.netloc
        if parts.password is not None:
            netloc = f"{parts.username}:***@{netloc.rpartition('@')[2]}"
    except ValueError:
        return "***"
    if netloc == parts.netloc and not parts.query:
        return value
    return urlunsplit(parts._replace(netloc=netloc, query="***" if parts.query else ""))


def slack_token_kind(token: str) -> str:
    """Describe a Slack token by its prefix only, e.g. "a user token (xoxp-...)"."""
    for prefix, kind in _SLACK_TOKEN_KINDS:
        if token.startswith(prefix):
            return kind
    return "a value that is not a Slack token"


def check(c: Config, rd: Reader) -> Config:
    """Checks of single values by format, and of keys together; normalises some values."""

    def norm(key: str, fn: Callable[[str], str], value: str) -> str:
        try:
            return fn(value)
        except ValueError as exc:
            rd.error(key, str(exc))
            return value

    imds = replace(c.imds, endpoint=norm("imds.endpoint", endpoint, c.imds.endpoint))
    try:
        sqlite_path = store_url(c.store.url)[1]
    except ValueError as exc:
        rd.error("store.url", str(exc))
        sqlite_path = ""
    if on_temp_disk(sqlite_path):
        rd.warnings.append(
            "store.url: the SQLite file is on the temporary disk (/mnt, D:), which Redeploy"
            " and Preempt wipe; put it on the OS disk, e.g. sqlite:////var/lib/sebridge/state.db"
        )
    norm("http.listen", lambda v: listen(v)[0], c.http.listen)
    public_url = c.http.public_url
    if public_url:
        public_url = norm("http.public_url", lambda v: http_url(v, query=False), public_url)
        if not c.http.link_secret:
            rd.required("http.link_secret", "when http.public_url is set (it signs approval links)")
    if not c.jsonl.path:
        rd.required("jsonl.path", '(write "-" for stdout)')
    if c.templates.dir and not os.path.isdir(c.templates.dir):
        rd.error("templates.dir", f'"{c.templates.dir}" is not a directory')
    api_url = norm("slack.api_url", http_url, c.slack.api_url)
    _check_slack(c.slack, rd)
    _check_teams(c, rd)
    _check_jira(c.jira, rd)
    return replace(
        c,
        imds=imds,
        http=replace(c.http, public_url=public_url.rstrip("/")),
        slack=replace(c.slack, api_url=api_url if api_url.endswith("/") else api_url + "/"),
    )


def _check_slack(s: SlackConfig, rd: Reader) -> None:
    for i, approver in enumerate(s.approvers):
        if not SLACK_ID.fullmatch(approver):
            rd.error(
                f"slack.approvers[{i}]",
                f'"{approver}" is not a Slack user id (U..., W...) or user-group id (S...)',
            )
    if not s.enabled:
        for other in ("app_token", "signing_secret"):
            if getattr(s, other):
                rd.required("slack.bot_token", f"when slack.{other} is set")
        return
    if not s.bot_token.reveal().startswith("xoxb-"):
        kind = slack_token_kind(s.bot_token.reveal())
        rd.error("slack.bot_token", f"expected a bot token (xoxb-...), got {kind}")
    if s.app_token and not s.app_token.reveal().startswith("xapp-"):
        kind = slack_token_kind(s.app_token.reveal())
        rd.error("slack.app_token", f"expected an app-level token (xapp-...), got {kind}")
    if not s.channel:
        rd.required("slack.channel", "when Slack is enabled (slack.bot_token is set)")
    if not s.app_token and not s.signing_secret:
        rd.problems.append(
            "slack: set app_token (Socket Mode) or signing_secret (HTTP mode)"
            f"{rd.env.why_empty('slack.app_token')}"
        )
    if not s.approvers:
        rd.warnings.append("slack.approvers is empty: nobody can approve from Slack")


def _check_teams(c: Config, rd: Reader) -> None:
    if not c.teams.enabled:
        return
    try:
        webhook_url(c.teams.webhook_url.reveal())
    except ValueError as exc:
        rd.error("teams.webhook_url", str(exc))
    if not c.http.public_url:
        rd.warnings.append("teams is enabled but http.public_url is empty: no approval links")


def _check_jira(j: JiraConfig, rd: Reader) -> None:
    if j.url:
        try:
            http_url(j.url)
        except ValueError as exc:
            rd.error("jira.url", str(exc))
    elif j.api_token or j.pat:
        rd.required("jira.url", f"when jira.{'pat' if j.pat else 'api_token'} is set")
        return
    else:
        return
    if not j.project:
        rd.required("jira.project", "when Jira is enabled (jira.url is set)")
    if j.pat and j.api_token:
        rd.problems.append(
            "jira: set email and api_token (Jira Cloud) or pat (Data Center), not both"
        )
    elif not j.pat:
        if not j.email and not j.api_token:
            rd.problems.append(
                "jira: set email and api_token (Jira Cloud) or pat (Data Center)"
                f"{rd.env.why_empty('jira.api_token') or rd.env.why_empty('jira.pat')}"
            )
        elif not j.api_token:
            rd.required("jira.api_token", "with jira.email (or set jira.pat instead)")
        elif not j.email:
            rd.required("jira.email", "with jira.api_token")
