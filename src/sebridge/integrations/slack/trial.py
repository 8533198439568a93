"""`sebridge check --send-test` for Slack: one plain message in the channel, and its ts."""

from __future__ import annotations

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from sebridge.integrations.base import Finding, TrialNote
from sebridge.integrations.slack.settings import SlackSettings

__all__ = ["send_trial"]

# What a person does about Slack's answer.
_FIXES = {
    "not_in_channel": "invite the bot there (/invite @sebridge)",
    "channel_not_found": "check slack.channel (a channel id like C0123456789)",
    "invalid_auth": "check slack.bot_token (copy the Bot User OAuth Token again)",
    "not_authed": "check slack.bot_token",
    "token_revoked": "the app was uninstalled or the token revoked: reinstall, update the token",
    "account_inactive": "the app was uninstalled or the token revoked: reinstall, update the token",
    "missing_scope": "add chat:write under OAuth & Permissions and reinstall the app",
    "is_archived": "the channel is archived: unarchive it, or set slack.channel to another",
}


def send_trial(settings: SlackSettings, client: WebClient, note: TrialNote) -> Finding:
    """chat.postMessage of the note's text to slack.channel."""
    try:
        answer = client.chat_postMessage(channel=settings.channel, text=note.text)
    except SlackApiError as exc:
        error = str(exc.response.get("error") or exc.response.status_code)
        fix = _FIXES.get(error, "see https://api.slack.com/methods/chat.postMessage#errors")
        return Finding("slack", False, f"test message not posted ({error}): {fix}")
    except OSError as exc:
        return Finding("slack", False, f"test message not posted: cannot reach Slack: {exc}")
    return Finding(
        "slack",
        True,
        f"test message posted in {answer.get('channel', settings.channel)} (ts {answer['ts']})",
    )
