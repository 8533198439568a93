"""The throwaway webhook's rig (tests/throwaway/jsonpost): the fake webhook; JSON data."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from fakes.webhook import FakeWebhook
from rigs.base import Rig, assert_displayable, strings
from sebridge.model.message import FIELD_LIMIT, Message
from throwaway.jsonpost import JsonPost


class JsonPostRig(Rig):
    integration = JsonPost()
    throttles: ClassVar[Mapping[int, float]] = {429: 1.0}

    def __init__(self) -> None:
        super().__init__()
        self.fake = FakeWebhook()

    def section(self) -> dict[str, Any]:
        return {"url": self.fake.url}

    def port(self) -> int:
        return self.fake.port

    def answer(self, status: int, retry_after: int | None = None) -> None:
        self.fake.fail_next(status, retry_after=retry_after, body=f"refused {self.fake.url}")

    def hang(self) -> None:
        self._held(self.fake.hold_next())

    def secrets(self) -> list[str]:
        return [self.fake.token, self.fake.sig]

    def delivered(self) -> int:
        return len(self.fake.bodies)

    def check_arrived(self, sent: Sequence[Message]) -> None:
        assert len(self.fake.bodies) == len(sent)
        assert all(len(body["event_id"]) <= FIELD_LIMIT for body in self.fake.bodies)
        # JSON data, no markup: its escaping is JSON's.
        assert_displayable([s for body in self.fake.bodies for s in strings(body)])
