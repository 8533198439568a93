"""Teams' rig: the fake Workflows webhook; markdown escaping and the 28 KB limit."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import urlsplit

from fakes.teams import MAX_MESSAGE, FakeTeams
from rigs.base import Rig, assert_displayable, registered, strings
from sebridge.integrations.teams import Teams
from sebridge.model.message import Message


def _rendered(card: Any) -> Iterator[str]:
    """The texts of an Adaptive Card that Teams renders as markdown: TextBlocks, facts."""
    if isinstance(card, dict):
        if card.get("type") == "TextBlock" and isinstance(card.get("text"), str):
            yield card["text"]
        for fact in card.get("facts") or ():
            yield str(fact.get("value", ""))
        for value in card.values():
            yield from _rendered(value)
    elif isinstance(card, list):
        for value in card:
            yield from _rendered(value)


class TeamsRig(Rig):
    integration = registered(Teams)
    throttles: ClassVar[Mapping[int, float]] = {429: 5.0}

    def __init__(self) -> None:
        super().__init__()
        self.fake = FakeTeams()

    def section(self) -> dict[str, Any]:
        return {"webhook_url": self.fake.workflows_url}

    def port(self) -> int:
        return int(urlsplit(self.fake.base).port or 0)

    def answer(self, status: int, retry_after: int | None = None) -> None:
        self.fake.fail_next(status, f"refused {self.fake.workflows_url}", retry_after=retry_after)

    def hang(self) -> None:
        self._held(self.fake.hold_next())

    def secrets(self) -> list[str]:
        return [self.fake.sig, self.fake.workflow]

    def delivered(self) -> int:
        return len(self.fake.shown)

    def check_arrived(self, sent: Sequence[Message]) -> None:
        posts = self.fake.posts
        assert len(posts) == len(sent) and all(p.status == 202 for p in posts)
        assert all(p.size <= MAX_MESSAGE for p in posts)
        assert len(self.fake.shown) == len(posts)  # the flow drops a card over 28 KB
        assert_displayable([s for p in posts for s in strings(p.body)])
        rendered = [s for p in posts for s in _rendered(p.body)]  # markdown (not fallbackText)
        assert_displayable(rendered, markup=("**bold**", "[link](http"))
