"""Slack's part of `sebridge check`: token, scopes, channel.

Each check returns findings a person can act on; none raises for Slack's
answer. A problem is named by the key to look at (slack.bot_token,
slack.channel, slack.api_url) and says Slack's answer. Secrets never appear
in a finding.
"""

from __future__ import annotations

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from sebridge.integrations.base import Finding
from sebridge.integrations.slack.settings import SlackSettings

__all__ = ["check_slack", "needed_slack_scopes"]


def needed_slack_scopes(config: SlackSettings) -> set[str]:
    """The bot scopes sebridge uses with this configuration."""
    needed = {"chat:write"}
    if any(a.startswith("S") for a in config.approvers):
        needed.add("usergroups:read")
    private = config.channel.startswith("G")
    needed.add("groups:read" if private else "channels:read")
    needed.add("groups:history" if private else "channels:history")
    return needed


def check_slack(config: SlackSettings, client: WebClient) -> list[Finding]:
    """auth.test, the scopes it reports, and the channel (exists, bot is a member)."""
    findings: list[Finding] = []
    try:
        auth = client.auth_test()
    except SlackApiError as exc:
        said = (
            f"auth.test failed: Slack answered {_error(exc)}: copy the Bot User OAuth Token again"
        )
        return [Finding("slack.bot_token", False, said)]
    except OSError as exc:
        return [Finding("slack.api_url", False, f"cannot reach Slack at {config.api_url}: {exc}")]
    findings.append(
        Finding("slack", True, f"token works: bot {auth.get('user')} in {auth.get('team')}")
    )
    granted = {
        s.strip() for s in (auth.headers.get("x-oauth-scopes") or "").split(",") if s.strip()
    }
    missing = sorted(needed_slack_scopes(config) - granted)
    if missing:
        findings.append(
            Finding(
                "slack.bot_token",
                False,
                f"the token lacks scopes {', '.join(missing)}: add them under "
                "OAuth & Permissions (or deploy/slack-app-manifest.yml) and reinstall the app",
            )
        )
    else:
        findings.append(Finding("slack", True, "scopes: all granted"))
    if not {"channels:read", "groups:read"} & set(missing):
        # Without the read scope Slack answers missing_scope: the line above says it once.
        findings.append(_check_channel(config.channel, client))
    return findings


def _check_channel(channel: str, client: WebClient) -> Finding:
    try:
        info = client.conversations_info(channel=channel)
    except SlackApiError as exc:
        error = _error(exc)
        hint = "use a channel id like C0123456789" if error == "channel_not_found" else ""
        said = f"channel {channel}: Slack answered {error}{': ' + hint if hint else ''}"
        return Finding("slack.channel", False, said)
    except OSError as exc:
        return Finding("slack.api_url", False, f"channel {channel}: cannot reach Slack: {exc}")
    data = info.get("channel") or {}
    if not data.get("is_member", True):
        return Finding(
            "slack.channel",
            False,
            f"the bot is not in #{data.get('name', channel)}: /invite @sebridge there",
        )
    return Finding("slack", True, f"channel #{data.get('name', channel)}: the bot is a member")


def _error(exc: SlackApiError) -> str:
    return str(exc.response.get("error") or exc.response.status_code)
