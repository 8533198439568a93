"""Slack sink: one message per event, updated in place, plus a thread reply per transition.

The first transition posts the parent message (blocks from slack/message.j2,
buttons while approvable, the event id in its metadata); the Receipt
(channel, ts) lets later transitions chat.update it and reply in its thread.
"""

from __future__ import annotations

import http.client
import json
import re
import urllib.parse
import urllib.request
from collections.abc import Callable, Collection
from datetime import UTC, datetime
from typing import Any, TypeVar

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web import SlackResponse

from sebridge.integrations.library_deadlines import CallExpired, reporting_context
from sebridge.integrations.render import Renderer
from sebridge.integrations.samples import sample_messages
from sebridge.integrations.slack.errors import delivery_error
from sebridge.integrations.slack.limits import MAX_TEXT, fit_blocks
from sebridge.integrations.slack.lookup import PARENT_TYPE, REPLY_TYPE, find_parent, reply_posted
from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.deadline import Deadline
from sebridge.kernel.errors import PermanentDeliveryError
from sebridge.kernel.text import clip
from sebridge.model import Receipt, TransitionKind
from sebridge.model.message import Message, shown

__all__ = ["SlackSink", "build_slack_client", "escape_mrkdwn", "slack_date", "slack_user"]

MESSAGE = "slack/message.j2"  # the parent message's blocks, as JSON
TEXT = "slack/text.j2"  # its plain fallback line (notifications, screen readers)
REPLY = "slack/reply.j2"  # one thread reply per later transition
TIMEOUT = 10  # seconds for a Web API call's whole answer; the dispatcher retries after

_T = TypeVar("_T")
_USER_ID = re.compile(r"[UW][A-Z0-9]{2,}")
_TRANSPORT = (SlackClientError, OSError, http.client.HTTPException)


def escape_mrkdwn(value: object) -> str:
    """Escape &, < and > (in that order) so text cannot form mentions, links or dates."""
    text = "" if value is None else str(value)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_user(actor: object, actor_id: object = None) -> str:
    """A Slack user as a mention (by `actor_id`, its member id, or an actor that is one: a
    record from before names were kept); any other actor (policy, a CLI user) as text."""
    for ref in (actor_id, actor):
        if ref is not None and _USER_ID.fullmatch(str(ref)):
            return f"<@{ref}>"
    return escape_mrkdwn("" if actor is None else actor)


def mrkdwn_naming(note: object, actor: object, actor_id: object = None) -> str:
    """A note escaped for mrkdwn, its first "by NAME" (the approver a held or problem note
    names) said as a mention when Slack knows the person."""
    text = escape_mrkdwn(note)
    mention = slack_user(actor, actor_id)
    name = escape_mrkdwn(actor)
    if not name or mention == name:
        return text
    return text.replace(f"by {name}", f"by {mention}", 1)


def slack_date(moment: datetime | None) -> str:
    """A `<!date^...>` token: each reader sees the time in their own time zone."""
    if moment is None:
        return ""
    utc = moment.astimezone(UTC)
    fallback = utc.strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"<!date^{int(utc.timestamp())}^{{date_short_pretty}} {{time}}|{fallback}>"


def build_slack_client(
    bot_token: str, api_url: str = WebClient.BASE_URL, *, timeout: int = TIMEOUT
) -> WebClient:
    """A WebClient that makes exactly one HTTP request per call (`retry_handlers=[]`), each
    answered whole within `timeout` seconds.

    slack_sdk's own retries would stack on the dispatcher's backoff and ignore
    its Retry-After bookkeeping. slack_sdk reads HTTPS_PROXY but not NO_PROXY;
    a host listed in NO_PROXY is reached directly.
    """
    client = _BoundedClient(
        token=bot_token,
        base_url=api_url,
        timeout=timeout,
        ssl=reporting_context(),
        retry_handlers=[],
    )
    host = urllib.parse.urlsplit(api_url).hostname or ""
    if client.proxy and host and urllib.request.proxy_bypass(host):
        client.proxy = None
    return client


class _BoundedClient(WebClient):
    """Each Web API call (every method goes through `api_call`) answered whole within the
    client's `timeout`, connect to the last byte read, not each read within it: the TLS
    socket reports itself to the call's deadline (integrations/library_deadlines.py), which shuts it
    down when the time is up. Slack's Web API is https only; an http `api_url` (a test's
    fake) is bounded per read only. A call cut short raises CallExpired."""

    def api_call(self, api_method: str, **kwargs: Any) -> SlackResponse:
        with Deadline(self.timeout) as deadline:
            try:
                return super().api_call(api_method, **kwargs)
            except (OSError, http.client.HTTPException) as exc:
                if deadline.expired and not _timed_out(exc):  # cut short by the deadline
                    raise CallExpired(self.timeout) from None
                raise


def _timed_out(exc: BaseException) -> bool:
    """A read's own timeout (nothing came for `timeout` s), as urllib raises it."""
    return isinstance(exc, TimeoutError) or isinstance(getattr(exc, "reason", None), TimeoutError)


class _MessageGone(Exception):  # chat.update found no message: someone deleted it
    pass


class SlackSink:
    """Posts and updates one Slack message per event.

    Args:
        channel: a channel id (C...), or a name for the first post only:
            later calls use the id Slack answered with.
        mention: added to the first post of an event whose type is in
            `mention_types`, e.g. "<!subteam^S0456EFGH>". Config, not escaped.
        remind_mention: added to each reminder reply (config, not escaped).
    """

    def __init__(
        self,
        client: WebClient,
        channel: str,
        renderer: Renderer,
        *,
        mention: str = "",
        mention_types: Collection[str] = ("Preempt", "Terminate"),
        remind_mention: str = "",
        clock: Clock = utcnow,
    ) -> None:
        self._remind_mention = remind_mention
        self._client = client
        self._channel = channel
        self._renderer = renderer
        self._mention = mention
        self._mention_types = frozenset(mention_types)
        self._clock = clock
        renderer.add_filters(
            mrkdwn=escape_mrkdwn,
            slack_user=slack_user,
            slack_date=slack_date,
            mrkdwn_naming=mrkdwn_naming,
        )

    @property
    def client(self) -> WebClient:
        """The Web API client (the click handler shares it)."""
        return self._client

    def send(self, message: Message) -> Receipt | None:
        """Post the parent message, or update it and reply in its thread."""
        message = shown(message)  # IMDS's text safe to show, each field within its limit
        where = _where(message.receipt)
        if where is None:
            return self._post_parent(message)
        channel, ts = where
        context = self._context(message, first=False)
        blocks, text = self._blocks(context), self._text(TEXT, context)
        # The reminder's mention goes in its thread reply alone, never into the message's
        # headline (which would keep it until the next update).
        reminder = message.transition.kind == TransitionKind.REMINDER
        remind = {"mention": self._remind_mention} if reminder else {}
        reply = self._text(REPLY, {**context, **remind})  # first: a broken template changes nothing
        try:
            self._call("chat.update", channel, ts=ts, text=text, blocks=blocks)
        except _MessageGone:
            # Someone deleted the message: a new one, showing the current state,
            # takes its place, and the returned receipt replaces the old one.
            return self._post_parent(message, first=False)
        # The update is done. Should the reply fail, the error propagates as
        # mapped (retryable for network/5xx/429) and the dispatcher runs this
        # whole send again: repeating chat.update with the same blocks is
        # harmless (idempotent), and the reply is looked for before it is
        # posted again (its answer may have been lost, not the reply).
        t = message.transition
        key = f"{t.kind}@{t.at.isoformat()}"
        if message.maybe_sent and self._looked_up(reply_posted, channel, ts, key, t.at):
            return message.receipt
        metadata = {"event_type": REPLY_TYPE, "event_payload": {"event_id": t.event_id, "key": key}}
        # An alarm (started with unready VMs) is also shown in the channel, not only the thread.
        alarm = t.kind == TransitionKind.STARTED_UNREADY
        self._call(
            "chat.postMessage",
            channel,
            thread_ts=ts,
            text=reply,
            metadata=metadata,
            **({"reply_broadcast": True} if alarm else {}),
        )
        return message.receipt

    def show(self, channel: str, ts: str, message: Message, note: str) -> None:
        """Redraw a message in its current state with a note (a click on a stale event)."""
        blocks = self._blocks(self._context(message, first=False))
        blocks.append(
            {"type": "context", "elements": [{"type": "mrkdwn", "text": escape_mrkdwn(note)}]}
        )
        self._call("chat.update", channel, ts=ts, text=note, blocks=blocks)

    def check_templates(self) -> None:
        """Render every template against sample events at start-up; a failure names it."""
        for sample in sample_messages(
            description='Host update <!channel> & "quotes"\nnew line', actor="U0123ABCD"
        ):
            context = self._context(sample, first=True)
            self._blocks(context)
            for name in (TEXT, REPLY):
                self._render(name, context)

    def close(self) -> None:
        """Nothing held open: slack_sdk opens a connection per request."""

    def _blocks(self, context: dict[str, Any]) -> list[dict[str, Any]]:
        source = self._render(MESSAGE, context)
        try:
            blocks: list[dict[str, Any]] = json.loads(source)
        except ValueError as exc:
            raise PermanentDeliveryError(
                f"slack: template {MESSAGE} did not produce valid JSON: {exc}"
            ) from None
        shaped = isinstance(blocks, list) and all(
            isinstance(b, dict) and "type" in b for b in blocks
        )
        if not (shaped and blocks):
            raise PermanentDeliveryError(
                f"slack: template {MESSAGE} must produce a JSON list of Block Kit blocks"
            )
        return fit_blocks(blocks)

    def _post_parent(self, message: Message, *, first: bool = True) -> Receipt:
        e = message.transition.event
        if message.maybe_sent and first:
            # An earlier attempt may have posted it (its answer lost, or the daemon
            # died before recording it): never twice.
            ts = self._looked_up(find_parent, self._channel, e.event_id, message.transition.at)
            if ts:
                return Receipt(f"{self._channel}:{ts}", {"channel": self._channel, "ts": ts})
        context = self._context(message, first=first)
        blocks, text = self._blocks(context), self._text(TEXT, context)
        payload = {"event_id": e.event_id, "event_type": e.event_type, "vm": message.vm_name}
        response = self._call(
            "chat.postMessage",
            self._channel,
            text=text,
            blocks=blocks,
            unfurl_links=False,
            unfurl_media=False,
            metadata={"event_type": PARENT_TYPE, "event_payload": payload},
        )
        # Slack answers with the channel id even when given a name; chat.update needs the id.
        channel = str(response.get("channel") or self._channel)
        ts = str(response.get("ts") or "")
        return Receipt(external_id=f"{channel}:{ts}", data={"channel": channel, "ts": ts})

    def _call(self, method: str, channel: str, **payload: Any) -> SlackResponse:
        try:
            return self._client.api_call(method, json={"channel": channel, **payload})
        except _TRANSPORT as exc:
            gone = (
                isinstance(exc, SlackApiError) and exc.response.get("error") == "message_not_found"
            )
            if gone and method == "chat.update":
                raise _MessageGone from None
            token = self._client.token or ""
            raise delivery_error(exc, method=method, channel=channel, token=token) from None

    def _looked_up(self, lookup: Callable[..., _T], channel: str, *args: Any) -> _T:
        try:
            return lookup(self._client, channel, *args)
        except _TRANSPORT as exc:
            token = self._client.token or ""
            raise delivery_error(exc, method="lookup", channel=channel, token=token) from None

    def _context(self, message: Message, *, first: bool) -> dict[str, Any]:
        t, m = message.transition, message
        approved_by, approved_by_id, anyway_approved = m.decider
        mention = self._mention if first and t.event.event_type in self._mention_types else ""
        now = self._clock()
        return dict(
            t=t,
            e=t.event,
            vm=m.vm_name,
            policy=m.policy,
            dry_run=m.dry_run or t.dry_run,
            approvable=m.approvable,
            anyway=m.anyway,
            approved_by=approved_by,
            approved_by_id=approved_by_id,
            anyway_approved=anyway_approved,
            # Completed or cancelled: the message's state stays the end, whatever step
            # (a recover hook) follows it in the thread.
            ended=m.ended,
            mention=mention,
            now=now,
            readiness=m.readiness,
            prepare=m.prepare,
            rule=m.rule,
            decided=m.decided,
            held=m.held,
            next=m.outlook(now),
        )

    def _render(self, name: str, context: dict[str, Any]) -> str:
        return self._renderer.render_for("slack", name, **context)

    def _text(self, name: str, context: dict[str, Any]) -> str:
        """A plain message text (fallback text, thread reply), within Slack's limit."""
        return clip(self._render(name, context), MAX_TEXT)


def _where(receipt: Receipt | None) -> tuple[str, str] | None:
    """(channel, ts) of the parent message from an earlier receipt."""
    if receipt is None:
        return None
    channel, ts = receipt.data.get("channel", ""), receipt.data.get("ts", "")
    if not (channel and ts):
        channel, _, ts = receipt.external_id.partition(":")
    return (channel, ts) if channel and ts else None
