"""`sebridge check --send-test` for Slack: one plain message in the channel, and its ts."""

from __future__ import annotations

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from sebridge.integrations.base import Finding, TrialNote
from sebridge.integrations.slack.settings import SlackSettings

__all__ = ["send_trial"]

# What a person does about Slack's answer, and the key it is about.
_BOT = "slack.bot_token"
_CHANNEL = "slack.channel"
_FIXES = {
    "not_in_channel": (_CHANNEL, "invite the bot there (/invite @sebridge)"),
    "channel_not_found": (_CHANNEL, "use a channel id like C0123456789"),
    "invalid_auth": (_BOT, "copy the Bot User OAuth Token again"),
    "not_authed": (_BOT, "set the Bot User OAuth Token"),
    "token_revoked": (_BOT, "the app was uninstalled or the token revoked: reinstall it"),
    "account_inactive": (_BOT, "the app was uninstalled or the token revoked: reinstall it"),
    "missing_scope": (_BOT, "add chat:write under OAuth & Permissions and reinstall the app"),
    "is_archived": (_CHANNEL, "the channel is archived: unarchive it, or name another"),
}
# Any other answer: about the channel or the token, as Slack's list of errors says.
_OTHER = (
    f"{_BOT}, {_CHANNEL}",
    "see https://api.slack.com/methods/chat.postMessage#errors",
)


def send_trial(settings: SlackSettings, client: WebClient, note: TrialNote) -> Finding:
    """chat.postMessage of the note's text to slack.channel; a problem names the key to
    look at (slack.bot_token, slack.channel, slack.api_url) and Slack's answer."""
    try:
        answer = client.chat_postMessage(channel=settings.channel, text=note.text)
    except SlackApiError as exc:
        error = str(exc.response.get("error") or exc.response.status_code)
        key, fix = _FIXES.get(error, _OTHER)
        return Finding(key, False, f"test message not posted (Slack answered {error}): {fix}")
    except OSError as exc:
        return Finding(
            "slack.api_url",
            False,
            f"test message not posted: cannot reach Slack at {settings.api_url}: {exc}",
        )
    return Finding(
        "slack",
        True,
        f"test message posted in {answer.get('channel', settings.channel)} (ts {answer['ts']})",
    )
