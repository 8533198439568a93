"""cli/side_by_side.py: `check`'s checks at once, under one deadline, said in the order
they were added whatever order they finish in."""

from __future__ import annotations

import threading
from collections.abc import Callable

from sebridge.cli.side_by_side import SideBySide

Say = Callable[[str], None]


def failed(key: str, exc: BaseException) -> str:
    return f"{key} raised {type(exc).__name__}"


def test_outcomes_come_in_the_order_added_whatever_order_they_finish() -> None:
    second_done = threading.Event()

    def first(say: Say) -> None:
        second_done.wait(30)  # finishes after the second
        say("first")

    def second(say: Say) -> None:
        say("second")
        second_done.set()

    checks: SideBySide[str] = SideBySide()
    checks.add("a", first, failed)
    checks.add("b", second, failed)
    outcomes = checks.run(timeout=30)
    assert [(o.key, o.said, o.finished) for o in outcomes] == [
        ("a", ["first"], True),
        ("b", ["second"], True),
    ]


def test_at_the_deadline_what_was_said_stays_and_later_words_are_not_heard() -> None:
    release, late = threading.Event(), threading.Event()

    def hangs(say: Say) -> None:
        say("before")
        release.wait(30)
        say("after")
        late.set()

    checks: SideBySide[str] = SideBySide()
    checks.add("imds.endpoint", hangs, failed)
    (outcome,) = checks.run(timeout=0.2)
    release.set()
    assert late.wait(30)
    assert (outcome.key, outcome.said, outcome.finished) == ("imds.endpoint", ["before"], False)


def test_a_check_that_raises_is_said_by_its_key() -> None:
    def broken(say: Say) -> None:
        say("started")
        raise RuntimeError("a token: xoxb-secret")

    checks: SideBySide[str] = SideBySide()
    checks.add("slack.api_url", broken, failed)
    (outcome,) = checks.run(timeout=30)
    assert outcome.said == ["started", "slack.api_url raised RuntimeError"]
    assert outcome.finished
