"""Policy rules, pure: each matcher, windows in other time zones, first match, built-in rules."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sebridge.config.core import PolicyConfig
from sebridge.config.loader import from_mapping
from sebridge.model import EventType, ScheduledEvent
from sebridge.model.decision import NO_RULE, Decision
from sebridge.policy import Policy, decide
from sebridge.policy.compile import build_policy
from sebridge.policy.matchers import Facts

T0 = datetime(2024, 3, 4, 12, 0, tzinfo=UTC)  # a Monday


def event(
    kind: str = "Reboot",
    *,
    status: str = "Scheduled",
    resources: tuple[str, ...] = ("vm0",),
    source: str | None = "Platform",
    duration: int | None = -1,
    description: str | None = "Host server maintenance.",
) -> ScheduledEvent:
    return ScheduledEvent(
        "E1",
        kind,
        status,
        resources,
        not_before=T0 + timedelta(minutes=15) if status == "Scheduled" else None,
        description=description,
        source=source,
        duration_seconds=duration,
    )


def policy(*rules: dict[str, Any], hooks: dict[str, Any] | None = None) -> Policy:
    data: dict[str, Any] = {"policy": {"rules": list(rules)}}
    if hooks:
        data["hooks"] = hooks
    return build_policy(from_mapping(data).policy)


def action(p: Policy, e: ScheduledEvent, now: datetime = T0, vm: str = "vm0") -> str:
    return decide(e, p, vm, now).action


@pytest.mark.parametrize(
    ("matcher", "matching", "other", "why"),
    [
        (
            {"event_types": ["Freeze", "Reboot"]},
            event("Freeze"),
            event("Redeploy"),
            "event_types: Redeploy is not one of Freeze, Reboot",
        ),
        (
            {"sources": ["User"]},
            event(source="User"),
            event(source="Platform"),
            "sources: Platform is not one of User",
        ),
        (
            {"sources": ["User"]},
            event(source="User"),
            event(source=None),
            "sources: unknown (the api-version in use has no EventSource) is not one of User",
        ),
        (
            {"min_duration_seconds": 10},
            event(duration=10),
            event(duration=9),
            "min_duration_seconds: 9 s is under 10",
        ),
        (
            {"max_duration_seconds": 9},
            event(duration=9),
            event(duration=10),
            "max_duration_seconds: 10 s is over 9",
        ),
        (
            {"max_duration_seconds": 9},
            event(duration=0),
            event(duration=-1),
            "duration: unknown (-1) meets no bound",
        ),
        (
            {"min_duration_seconds": 0},
            event(duration=0),
            event(duration=-1),
            "duration: unknown (-1) meets no bound",
        ),
        (
            {"max_duration_seconds": 9},
            event(duration=3),
            event(duration=None),
            "duration: unknown (not sent) meets no bound",
        ),
        (
            {"this_vm": True},
            event(resources=("vm0", "vm1")),
            event(resources=("vm1",)),
            "this_vm = true: Resources (vm1) do not include vm0",
        ),
        (
            {"this_vm": True},
            event(resources=("_vm0",)),
            event(resources=()),
            "this_vm = true: Resources (none) do not include vm0",
        ),
        (
            {"this_vm": False},
            event(resources=("vm1",)),
            event(resources=("vm0",)),
            "this_vm = false: Resources (vm0) include vm0",
        ),
        (
            {"description": "host.*MAINT"},
            event(),
            event(description="Guest update"),
            'description: /host.*MAINT/ not found in "Guest update"',
        ),
        (
            {"description": "maintenance"},
            event(),
            event(description=None),
            "description: none sent (the api-version in use has no Description)",
        ),
    ],
)
def test_each_matcher_matches_and_misses(
    matcher: dict[str, Any], matching: ScheduledEvent, other: ScheduledEvent, why: str
) -> None:
    p = policy({"name": "m", "action": "approve", **matcher})
    assert decide(matching, p, "vm0", T0) == Decision("approve", "m")
    assert decide(other, p, "vm0", T0) == Decision("ask", NO_RULE)
    assert p.rules[0].misses(Facts(other, "vm0", T0)) == [why]
    assert p.rules[0].misses(Facts(matching, "vm0", T0)) == []


def test_a_pattern_that_backtracks_in_python_matches_a_megabyte_in_linear_time() -> None:
    # Python's re takes twice as long per extra "a" (31 of them: half a minute); RE2 reads
    # the text once, so this finishes at once or the suite's timeout fails it.
    p = policy({"action": "approve", "description": "^(a+)+$"})
    assert action(p, event(description="a" * 1_000_000 + "!")) == "ask"
    assert action(p, event(description="A" * 1_000_000)) == "approve"  # ignoring case


def test_first_matching_rule_wins_and_no_match_asks() -> None:
    p = policy(
        {"name": "freezes", "event_types": ["Freeze"], "action": "approve"},
        {"name": "platform", "sources": ["Platform"], "action": "inform"},
        {"name": "all freezes ignored", "event_types": ["Freeze"], "action": "ignore"},
    )
    assert decide(event("Freeze"), p, "vm0", T0).rule == "freezes"
    assert decide(event("Reboot"), p, "vm0", T0) == Decision("inform", "platform")
    assert decide(event("Reboot", source="User"), p, "vm0", T0) == Decision("ask", NO_RULE)


def test_a_rule_without_matchers_matches_everything_and_names_default() -> None:
    p = policy({"action": "ignore"})
    assert decide(event("Preempt", source=None), p, "vm0", T0) == Decision("ignore", "rule 1")


def test_the_decision_carries_the_rules_hooks_and_reminders() -> None:
    p = policy(
        {
            "name": "drain first",
            "action": "ask",
            "prepare": ["drain"],
            "recover": ["undrain"],
            "remind": [60, 600, 180, 60],
            "on_prepare_failure": "approve",
        },
        hooks={"drain": {"command": ["true"]}, "undrain": {"command": ["true"], "timeout": 5}},
    )
    assert decide(event(), p, "vm0", T0) == Decision(
        "ask",
        "drain first",
        prepare=("drain",),
        recover=("undrain",),
        remind=(600, 180, 60),
        on_prepare_failure="approve",
    )


def test_a_started_event_is_never_approved_by_a_rule() -> None:
    p = policy({"name": "everything", "action": "approve", "recover": ["up"]}, hooks=_up())
    started = decide(event(status="Started"), p, "vm0", T0)
    assert started == Decision("inform", "everything", recover=("up",))
    assert action(policy({"action": "ask"}), event(status="Started")) == "ask"


def _up() -> dict[str, Any]:
    return {"up": {"command": ["true"]}}


# -- windows ------------------------------------------------------------------------------


def _window(**window: Any) -> Policy:
    return policy({"name": "quiet hours", "action": "approve", "window": window})


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


@pytest.mark.parametrize(
    ("moment", "inside"),
    [
        ("2024-03-04T00:59:59+00:00", False),  # Mon 01:59:59 Berlin (CET, UTC+1)
        ("2024-03-04T01:00:00+00:00", True),  # Mon 02:00 Berlin
        ("2024-03-04T03:59:59+00:00", True),
        ("2024-03-04T04:00:00+00:00", False),  # end is excluded
        ("2024-03-05T01:30:00+00:00", False),  # a Tuesday
        ("2024-03-04T02:00:00+09:00", False),  # same instant spelled in Tokyo: Sun 18:00 Berlin
    ],
)
def test_window_in_another_time_zone(moment: str, inside: bool) -> None:
    p = _window(days=["mon"], start="02:00", end="05:00", timezone="Europe/Berlin")
    assert (action(p, event(), _at(moment)) == "approve") is inside


@pytest.mark.parametrize(
    ("moment", "inside"),
    [
        ("2024-03-08T20:59:00+00:00", False),  # Fri 21:59 Berlin
        ("2024-03-08T21:00:00+00:00", True),  # Fri 22:00: the window starts on Friday
        ("2024-03-09T02:59:00+00:00", True),  # Sat 03:59: still Friday's window
        ("2024-03-09T03:00:00+00:00", False),  # Sat 04:00: over
        ("2024-03-09T21:30:00+00:00", False),  # Sat 22:30: Saturday is not listed
        ("2024-03-08T02:00:00+00:00", False),  # Fri 03:00: Thursday's window, not listed
    ],
)
def test_window_crossing_midnight_belongs_to_the_day_it_starts(moment: str, inside: bool) -> None:
    p = _window(days=["fri"], start="22:00", end="04:00", timezone="Europe/Berlin")
    assert (action(p, event(), _at(moment)) == "approve") is inside


def test_window_across_daylight_saving_changes() -> None:
    # Berlin springs forward on 2024-03-31 (02:00 -> 03:00) and falls back on 2024-10-27.
    p = _window(days=["sun"], start="02:00", end="03:00", timezone="Europe/Berlin")
    spring = [
        T for T in _minutes("2024-03-31T00:00:00+00:00", 180) if action(p, event(), T) == "approve"
    ]
    assert spring == []  # 02:00-03:00 does not exist that night
    autumn = [
        T for T in _minutes("2024-10-26T23:00:00+00:00", 240) if action(p, event(), T) == "approve"
    ]
    # 02:00-03:00 happens twice (CEST, then CET): two hours of UTC, both inside.
    assert (autumn[0], autumn[-1], len(autumn)) == (
        _at("2024-10-27T00:00:00+00:00"),
        _at("2024-10-27T01:59:00+00:00"),
        120,
    )
    # A window after the change keeps its local hours: 04:00 is UTC+1 again.
    late = _window(days=["sun"], start="04:00", end="05:00", timezone="Europe/Berlin")
    assert action(late, event(), _at("2024-10-27T03:00:00+00:00")) == "approve"
    assert action(late, event(), _at("2024-10-27T02:59:00+00:00")) == "ask"


def _minutes(start: str, count: int) -> list[datetime]:
    first = _at(start)
    return [first + timedelta(minutes=m) for m in range(count)]


def test_window_defaults_every_day_all_day_utc() -> None:
    p = _window(start="00:00", end="24:00")
    assert all(
        action(p, event(), T0 + timedelta(hours=h)) == "approve" for h in range(0, 24 * 7, 5)
    )
    assert action(_window(days=["sat", "sun"]), event(), T0) == "ask"  # T0 is a Monday


def test_a_misses_line_names_the_window_and_local_time() -> None:
    p = _window(days=["sat"], start="01:00", end="05:00", timezone="America/New_York")
    (why,) = p.rules[0].misses(Facts(event(), "vm0", T0))
    assert why == "window: it is mon 07:00 in America/New_York, outside sat 01:00-05:00"


# -- built-in rules -------------------------------------------------------------------------


def _old_decide(e: ScheduledEvent, c: PolicyConfig, vm_name: str) -> str:
    """policy.py before rules (main at e09f35d), word for word; "notify" is now "ask"."""
    if c.only_this_vm and not e.affects(vm_name):
        return "ignore"
    if e.started:
        return "ask"
    if c.approve_user_events and e.user_initiated:
        return "approve"
    duration = e.duration_seconds
    if (
        e.event_type == EventType.FREEZE
        and duration is not None
        and 0 <= duration < c.approve_freeze_under_seconds
    ):
        return "approve"
    return "ask"


_EVENTS = [
    event(kind, status=status, resources=res, source=source, duration=duration)
    for kind, status, res, source, duration in itertools.product(
        ["Freeze", "Reboot", "Preempt", "Terminate"],
        ["Scheduled", "Started"],
        [("vm0",), ("vm1",), ()],
        ["Platform", "User", None],
        [None, -1, 0, 5, 8, 9, 10, 3600],
    )
]
_CONFIGS = [
    PolicyConfig(approve_user_events=user, approve_freeze_under_seconds=under, only_this_vm=only)
    for user, under, only in itertools.product([True, False], [0, 1, 9, 3600], [True, False])
]


@pytest.mark.parametrize("config", _CONFIGS, ids=repr)
def test_builtin_rules_decide_as_before_rules_existed(config: PolicyConfig) -> None:
    p = build_policy(config)
    assert p.builtin
    for e in _EVENTS:
        assert decide(e, p, "vm0", T0).action == _old_decide(e, config, "vm0"), e


def test_builtin_rules_have_readable_names() -> None:
    p = build_policy(PolicyConfig(only_this_vm=True))
    names = [
        decide(e, p, "vm0", T0).rule
        for e in (
            event(resources=("vm1",)),
            event(status="Started"),
            event(source="User"),
            event("Freeze", duration=5),
            event("Freeze", duration=9),
        )
    ]
    assert names == [
        "other VMs' events (only_this_vm)",
        "already started: nothing to approve",
        "user-initiated (approve_user_events)",
        "Freeze under 9 s (approve_freeze_under_seconds)",
        NO_RULE,
    ]
