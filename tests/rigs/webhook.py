"""The webhook's rig: a Standard Webhooks receiver that verifies every delivery; JSON data."""

from __future__ import annotations

import base64
import secrets
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from fakes.webhook import FakeWebhook
from rigs.base import Rig, assert_displayable, registered, strings
from sebridge.integrations.webhook import Webhook
from sebridge.model.message import FIELD_LIMIT, Message


def new_key() -> str:
    """A Standard Webhooks signing key, as docs/channels/webhook.md says to make one."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


class WebhookRig(Rig):
    integration = registered(Webhook)
    throttles: ClassVar[Mapping[int, float]] = {429: 5.0}

    def __init__(self) -> None:
        super().__init__()
        self.key = new_key()
        self.fake = FakeWebhook(keys=[self.key])

    def section(self) -> dict[str, Any]:
        return {"url": self.fake.url, "secret": self.key}

    def port(self) -> int:
        return self.fake.port

    def answer(self, status: int, retry_after: int | None = None) -> None:
        self.fake.fail_next(status, retry_after=retry_after, body=f"refused {self.fake.url}")

    def hang(self) -> None:
        self._held(self.fake.hold_next())

    def secrets(self) -> list[str]:
        return [self.fake.token, self.fake.sig, self.key, self.key.removeprefix("whsec_")]

    def delivered(self) -> int:
        return len(self.fake.bodies)

    def check_arrived(self, sent: Sequence[Message]) -> None:
        posts = self.fake.posts
        assert [p.status for p in posts] == [204] * len(sent)  # each verified, then taken
        assert all(p.raw.isascii() for p in posts)  # escaped JSON's way: \\u for the rest
        assert all(len(body["event_id"]) <= FIELD_LIMIT for body in self.fake.bodies)
        assert_displayable([s for body in self.fake.bodies for s in strings(body)])
