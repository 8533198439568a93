"""[teams]: the section's keys, what kind of webhook URL was given, and checks across both.

Two kinds of URL post to a Teams channel, and each takes one format:
- Workflows ("Post to a channel when a webhook request is received", Power
  Automate / Logic Apps): an Adaptive Card in a message envelope. It answers
  202 to any JSON, so a MessageCard sent there vanishes without an error.
- Office 365 connectors (`*.webhook.office.com/webhookb2/...`, retired by
  Microsoft in 2026): a MessageCard, answered with 200 and the body "1".
Workflows URLs on `*.logic.azure.com` stopped working on 2025-11-30 (the flows
moved to `*.environment.api.powerplatform.com`). A URL of either dead kind is
said at load time (`check` prints it, `run` logs it once at start), naming
what to do: deliveries to it would fail at run time.
The URL is a secret (its `sig` grants posting): messages name its kind only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from sebridge.config.checks import webhook_url
from sebridge.config.durations import Seconds
from sebridge.config.reader import Reader, option
from sebridge.config.secrets import Secret

__all__ = [
    "ADAPTIVE",
    "CONNECTOR",
    "MESSAGECARD",
    "OTHER",
    "WORKFLOWS",
    "TeamsSettings",
    "dead_url",
    "url_kind",
    "validate",
]

ADAPTIVE, MESSAGECARD = "adaptive", "messagecard"
WORKFLOWS, CONNECTOR, OTHER = "workflows", "connector", "other"
_UNSET = Secret()
_LOGIC_APPS_HOST = re.compile(r"prod-\d+\.[a-z0-9-]+\.logic\.azure\.(com|us|cn)", re.I)
_POWER_PLATFORM_HOST = re.compile(r"[a-z0-9.-]+\.environment\.api\.powerplatform\.com", re.I)
_CONNECTOR_HOST = re.compile(
    r"([a-z0-9-]+\.)?webhook\.office\.com|outlook\.office(365)?\.com", re.I
)
# Hosts of pages, not webhooks: Teams' own web app, and Power Automate's editor.
_TEAMS_PAGE_HOSTS = frozenset(
    {
        "teams.microsoft.com",
        "teams.live.com",
        "teams.cloud.microsoft",
        "make.powerautomate.com",
        "flow.microsoft.com",
    }
)
KIND_NAMES = {
    WORKFLOWS: "a Workflows (Power Automate) webhook URL",
    CONNECTOR: "an Office 365 connector URL",
    OTHER: "a URL of neither known kind",
}


@dataclass(frozen=True)
class TeamsSettings:
    """[teams]: enabled when webhook_url is set."""

    # The channel's webhook URL (a Workflows one: "Post to a channel when a webhook request
    # is received"): Teams is on when it is set. A secret: its sig grants posting.
    webhook_url: Secret = _UNSET
    # adaptive (an Adaptive Card, for a Workflows URL) or messagecard (for a retired Office
    # 365 connector URL).
    format: str = option(ADAPTIVE, choices=(ADAPTIVE, MESSAGECARD))
    # Seconds to wait for Teams' answer.
    timeout: Seconds = option(15.0, gt=0.0, le=120.0)

    @property
    def enabled(self) -> bool:
        return bool(self.webhook_url)


def url_kind(url: str) -> str:
    """WORKFLOWS, CONNECTOR or OTHER, by host and path (never shown: only the kind is)."""
    try:
        parts = urlsplit(url)
        host, path = parts.hostname or "", parts.path
    except ValueError:
        return OTHER
    if _LOGIC_APPS_HOST.fullmatch(host) and path.startswith("/workflows/"):
        return WORKFLOWS
    if (
        _POWER_PLATFORM_HOST.fullmatch(host)
        and "/powerautomate/automations/direct/workflows/" in path
    ):
        return WORKFLOWS
    if _CONNECTOR_HOST.fullmatch(host) and path.startswith(("/webhookb2/", "/webhook/")):
        return CONNECTOR
    return OTHER


_CONNECTOR_RETIRED = (
    "is an Office 365 connector URL (retired by Microsoft in 2026): deliveries to it fail."
    ' Create a Workflows webhook instead (in the channel: ... -> Workflows -> "Post to a'
    ' channel when a webhook request is received") and use the URL it shows'
)
_LOGIC_APPS_STOPPED = (
    "is a Workflows URL on *.logic.azure.com, which Microsoft stopped on 2025-11-30 (the"
    " flows moved to *.environment.api.powerplatform.com): open the flow in Power Automate,"
    ' copy the new URL from its trigger ("When a Teams webhook request is received") and'
    " use that"
)


def dead_url(url: str) -> str | None:
    """What to do about a webhook URL that no longer delivers (a retired connector, a
    Workflows URL on the stopped *.logic.azure.com hosts); None for a live one."""
    kind = url_kind(url)
    if kind == CONNECTOR:
        return _CONNECTOR_RETIRED
    if kind == WORKFLOWS and _LOGIC_APPS_HOST.fullmatch(urlsplit(url).hostname or ""):
        return _LOGIC_APPS_STOPPED
    return None


def validate(s: TeamsSettings, rd: Reader) -> TeamsSettings:
    """The URL's scheme, a link to Teams itself (not a webhook), and its kind against `format`.

    Without `[http] public_url` Teams is still valid: cards are alerts without an
    Approve… button, which `sebridge check` says (cli/doctor.py).
    """
    if not s.enabled or s.webhook_url.is_unread:
        return s
    url = s.webhook_url.reveal()
    key = rd.secret_key("teams.webhook_url")  # or teams.webhook_url_file
    try:
        webhook_url(url)
    except ValueError as exc:
        rd.error(key, str(exc))
        return s
    if _is_teams_page(url):
        rd.error(
            key,
            "is a link to a Teams page (a channel or chat link), not a webhook: in the channel,"
            ' ... -> Workflows -> "Post to a channel when a webhook request is received", and'
            " use the URL it shows",
        )
        return s
    kind = url_kind(url)
    if s.format == MESSAGECARD and kind == WORKFLOWS:
        rd.error(
            "teams.format",
            '"messagecard" cannot go to a Workflows webhook URL (it answers 202 and never shows'
            ' a MessageCard): use format = "adaptive", or an Office 365 connector URL',
        )
    dead = dead_url(url)
    if dead is not None:
        rd.warnings.append(f"{key} {dead}")
    return replace(s, webhook_url=Secret(url))


def _is_teams_page(url: str) -> bool:
    """A link people open in Teams or Power Automate (a channel's "Copy link", the flow's
    editor): pasted by mistake for the webhook, it would answer posts with an HTML page."""
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        return False
    return host in _TEAMS_PAGE_HOSTS
