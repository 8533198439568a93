"""[slack]: the section's keys and the checks that need more than their types."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from sebridge.config.checks import http_url
from sebridge.config.reader import Reader, option
from sebridge.config.secrets import Secret
from sebridge.model import EventType

__all__ = ["SlackSettings", "slack_token_kind", "validate"]

SLACK_ID = re.compile(r"[UWS][A-Z0-9]{2,}")
_UNSET = Secret()  # immutable: one default serves every secret
EVENT_TYPES = tuple(t.value for t in EventType)
# Token prefixes are not secret; naming the kind helps a person who pasted the wrong one.
_TOKEN_KINDS = (
    ("xoxe.xoxb-", "a rotating bot token (xoxe.xoxb-...), which expires after 12 hours"),
    ("xoxe.xoxp-", "a rotating user token (xoxe.xoxp-...)"),
    ("xoxb-", "a bot token (xoxb-...)"),
    ("xapp-", "an app-level token (xapp-...)"),
    ("xoxp-", "a user token (xoxp-...)"),
    ("xoxa-", "a workspace app token (xoxa-...)"),
    ("xoxe-", "a refresh token (xoxe-...)"),
    ("xoxs-", "a session token (xoxs-...)"),
)


@dataclass(frozen=True)
class SlackSettings:
    """[slack]: enabled when bot_token is set; Socket Mode when app_token is set."""

    # The bot token (xoxb-...): Slack is on when it is set.
    bot_token: Secret = _UNSET
    # The app-level token (xapp-...): set, Socket Mode (no inbound port); unset, HTTP mode.
    app_token: Secret = _UNSET
    # Verifies the requests Slack sends in HTTP mode (required without app_token).
    signing_secret: Secret = _UNSET
    # The channel id (or name) event messages go to; required when Slack is on.
    channel: str = ""
    # Who may press Approve: user ids (U..., W...) and user-group ids (S...); empty: nobody
    # can approve from Slack.
    approvers: tuple[str, ...] = ()
    # The Slack Web API's base URL (a fake's in tests), normalised to end with "/".
    api_url: str = "https://slack.com/api/"
    # Put before alerts of mention_types, e.g. `<!subteam^S0456EFGH>`.
    mention: str = ""
    # Added to each reminder (a thread reply), e.g. `<!subteam^S0456EFGH>` or `<!here>`.
    remind_mention: str = ""
    # The event types whose alerts get the mention.
    mention_types: tuple[str, ...] = option(("Preempt", "Terminate"), choices=EVENT_TYPES)
    # Socket Mode, in a fleet: how many agents hold a connection (Slack allows 10 per app).
    socket_connections: int = option(
        2, ge=1, le=10, why="Slack allows at most 10 Socket Mode connections per app"
    )

    @property
    def enabled(self) -> bool:
        return bool(self.bot_token)

    @property
    def socket_mode(self) -> bool:
        return bool(self.app_token)


def slack_token_kind(token: str) -> str:
    """Describe a Slack token by its prefix only, e.g. "a user token (xoxp-...)"."""
    for prefix, kind in _TOKEN_KINDS:
        if token.startswith(prefix):
            return kind
    return "a value that is not a Slack token"


def validate(s: SlackSettings, rd: Reader) -> SlackSettings:
    """Token kinds, channel, approver ids, and one of Socket Mode or HTTP mode."""
    try:
        api_url = http_url(s.api_url)
    except ValueError as exc:
        rd.error("slack.api_url", str(exc))
        api_url = s.api_url
    for i, approver in enumerate(s.approvers):
        if not SLACK_ID.fullmatch(approver):
            rd.error(
                f"slack.approvers[{i}]",
                f'"{approver}" is not a Slack user id (U..., W...) or user-group id (S...)',
            )
    normalised = replace(s, api_url=api_url if api_url.endswith("/") else api_url + "/")
    if not s.enabled:
        for other in ("app_token", "signing_secret"):
            if getattr(s, other):
                rd.required("slack.bot_token", f"when slack.{other} is set")
        if s.remind_mention:  # a key that does nothing must not look like it works
            rd.error(
                "slack.remind_mention",
                "set while Slack is off (slack.bot_token is not set): no reminder would"
                " mention anyone; set slack.bot_token, or remove the key",
            )
        return normalised
    if not s.bot_token.is_unread and not s.bot_token.reveal().startswith("xoxb-"):
        kind = slack_token_kind(s.bot_token.reveal())
        rd.error("slack.bot_token", f"expected a bot token (xoxb-...), got {kind}")
    if s.app_token and not s.app_token.is_unread and not s.app_token.reveal().startswith("xapp-"):
        kind = slack_token_kind(s.app_token.reveal())
        rd.error("slack.app_token", f"expected an app-level token (xapp-...), got {kind}")
    if not s.channel:
        rd.required("slack.channel", "when Slack is enabled (slack.bot_token is set)")
    if not s.app_token and not s.signing_secret:
        rd.problem(
            "slack: set app_token (Socket Mode) or signing_secret (HTTP mode)",
            about=("slack.app_token", "slack.signing_secret"),
        )
    if not s.approvers:
        rd.warnings.append("slack.approvers is empty: nobody can approve from Slack")
    return normalised
