"""Slack's rig: the fake Web API; mrkdwn escaping and Block Kit's limits."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import urlsplit

from fakes.slack import FakeSlack, block_errors
from rigs.base import Rig, assert_displayable, registered, strings
from sebridge.integrations.slack import Slack, limits
from sebridge.model.message import Message, Sink


def _texts(blocks: Any) -> Iterator[str]:
    """The texts of Block Kit blocks (text objects' "text"; a button's value is data)."""
    if isinstance(blocks, dict):
        if isinstance(blocks.get("text"), str):
            yield blocks["text"]
        for value in blocks.values():
            yield from _texts(value)
    elif isinstance(blocks, list):
        for value in blocks:
            yield from _texts(value)


class SlackRig(Rig):
    integration = registered(Slack)
    throttles: ClassVar[Mapping[int, float]] = {429: 1.0}

    def __init__(self) -> None:
        super().__init__()
        token = f"xoxb-4242-{secrets.token_hex(16)}"
        self.fake = FakeSlack(bot_token=token, app_token=f"xapp-1-{secrets.token_hex(16)}")

    def section(self) -> dict[str, Any]:
        f = self.fake
        return {
            "bot_token": f.bot_token,
            "app_token": f.app_token,
            "channel": "C0123456789",
            "api_url": f.url,
        }

    def port(self) -> int:
        return int(urlsplit(self.fake.url).port or 0)

    def impatient(self, seconds: float) -> Sink:
        sink = self.sink()
        sink.client.timeout = seconds  # type: ignore[attr-defined]  # no key: fixed at 10 s
        return sink

    def answer(self, status: int, retry_after: int | None = None) -> None:
        body = json.dumps({"ok": False, "error": f"refused {self.fake.bot_token}"})
        self.fake.fail_next(
            "chat.postMessage",
            status=status,
            retry_after=retry_after,
            body=body,
            send_retry_after=retry_after is not None,
        )

    def hang(self) -> None:
        self._held(self.fake.hold_next("chat.postMessage"))

    def secrets(self) -> list[str]:
        return [self.fake.bot_token, self.fake.app_token]

    def delivered(self) -> int:
        return len(self.fake.messages)

    def check_arrived(self, sent: Sequence[Message]) -> None:
        calls = [c for c in self.fake.calls if c.method in ("chat.postMessage", "chat.update")]
        assert len(calls) >= len(sent) and all(c.status == 200 for c in calls)
        for call in calls:
            text, blocks = call.params.get("text") or "", call.params.get("blocks") or []
            assert len(text) <= limits.MAX_TEXT and block_errors(blocks) == []
            assert_displayable(list(strings(call.params)))
            # mrkdwn: IMDS text forms no mention (metadata and button values are data)
            assert_displayable([text, *_texts(blocks)], markup=("<!channel>", "<@U0123ABCD>"))
