"""`sebridge policy explain`: from the store and from a file, through the CLI; bad input is
exit 2 with one line; and explain decides exactly as decide()."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from helpers import cli_main, free_port, run_cli, write_config
from sebridge.config.core import PolicyConfig
from sebridge.config.loader import from_mapping
from sebridge.imds.simulator import Simulator
from sebridge.model import ScheduledEvent
from sebridge.policy import decide
from sebridge.policy.compile import build_policy
from sebridge.policy.explain import explain

RULES = """
[[policy.rules]]
name = "other VMs"
this_vm = false
action = "ignore"

[[policy.rules]]
name = "quiet hours"
event_types = ["Reboot", "Redeploy"]
window = { days = ["sat"], start = "22:00", end = "04:00", timezone = "Europe/Berlin" }
action = "approve"
prepare = ["drain"]
recover = ["drain"]

[[policy.rules]]
name = "reboots"
event_types = ["Reboot"]
action = "ask"
remind = [600, 180]

[hooks.drain]
command = ["true"]
"""
EVENT = {
    "EventId": "602D9444-D2CD-49C7-8624-8643E7171297",
    "EventType": "Reboot",
    "ResourceType": "VirtualMachine",
    "Resources": ["vm0", "vm1"],
    "EventStatus": "Scheduled",
    "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT",
    "Description": "Host server is undergoing maintenance.",
    "EventSource": "Platform",
    "DurationInSeconds": 7,
}
pytestmark = pytest.mark.usefixtures("cli_in_process")
run = cli_main
SATURDAY_NIGHT = "2024-03-09T23:30:00+01:00"
MONDAY_NOON = "2024-03-11T12:00:00+01:00"


@pytest.fixture
def cfg(tmp_path: Path, sim: Simulator) -> str:
    path = write_config(
        tmp_path / "sebridge.toml",
        endpoint=sim.url,
        db=tmp_path / "state.db",
        vm_name="vm0",
        extra=RULES,
    )
    return str(path)


def write(tmp_path: Path, name: str, data: Any) -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return str(path)


def test_an_event_file_on_a_monday_is_asked_with_reasons(cfg: str, tmp_path: Path) -> None:
    code, out, err = run(
        "policy",
        "explain",
        "--config",
        cfg,
        "--event",
        write(tmp_path, "e.json", EVENT),
        "--at",
        MONDAY_NOON,
    )
    assert code == 0, err
    assert out.splitlines() == [
        "event 602D9444-D2CD-49C7-8624-8643E7171297: Reboot, Scheduled, source Platform, "
        "duration 7 s",
        "  NotBefore Mon, 19 Sep 2016 18:29:47 GMT; Resources vm0, vm1 (this VM: vm0)",
        '  Description "Host server is undergoing maintenance."',
        "at 2024-03-11 11:00:00 UTC, [[policy.rules]] in order, first match wins:",
        '  policy.rules[1] "other VMs": no match',
        "      this_vm = false: Resources (vm0, vm1) include vm0",
        '  policy.rules[2] "quiet hours": no match',
        "      window: it is mon 12:00 in Europe/Berlin, outside sat 22:00-04:00",
        '  policy.rules[3] "reboots": matches',
        "      event_types: Reboot is one of Reboot",
        "decision: ask: a person decides (Approve buttons, links, Jira status)",
        "  rule: reboots",
        "  reminders: 600 s, 180 s before NotBefore, while nobody approved it or its approval "
        "is held",
        # Explained at --at, long after the file's NotBefore: as if first seen then.
        "  reminders that can never come (NotBefore had come when it was first announced): "
        "600 s, 180 s before NotBefore",
    ]


def test_a_document_file_in_the_window_is_approved_after_the_drain(
    cfg: str, tmp_path: Path
) -> None:
    document = {"DocumentIncarnation": 3, "Events": [EVENT]}
    code, out, _ = run(
        "policy",
        "explain",
        "--config",
        cfg,
        "--event",
        write(tmp_path, "d.json", document),
        "--at",
        SATURDAY_NIGHT,
    )
    assert code == 0
    assert out.splitlines()[-5:] == [
        "decision: approve at once (after the prepare hooks succeed)",
        "  rule: quiet hours",
        "  prepare hooks: drain (on_prepare_failure: hold)",
        "  a listed VM no agent runs on is named (not drained), and does not hold it",
        "  recover hooks: drain",
    ]


def test_another_vm_name_and_json(cfg: str, tmp_path: Path) -> None:
    code, out, _ = run(
        "policy",
        "explain",
        "--config",
        cfg,
        "--event",
        write(tmp_path, "e.json", EVENT),
        "--vm-name",
        "vm9",
        "--json",
    )
    assert code == 0
    data = json.loads(out)
    assert data["vm_name"] == "vm9"
    assert data["rules"] == [
        {
            "number": 1,
            "name": "other VMs",
            "matched": True,
            "misses": [],
            "reasons": ["this_vm = false: Resources (vm0, vm1) do not include vm9"],
        }
    ]
    assert data["as_of"] == "file"
    assert data["decision"]["action"] == "ignore" and data["recorded"] is None


def test_an_approve_rule_on_a_started_event_says_it_only_announces(
    cfg: str, tmp_path: Path
) -> None:
    started = {**EVENT, "EventStatus": "Started", "NotBefore": ""}
    code, out, _ = run(
        "policy",
        "explain",
        "--config",
        cfg,
        "--event",
        write(tmp_path, "s.json", started),
        "--at",
        SATURDAY_NIGHT,
    )
    assert code == 0
    assert "decision: inform: announced, no approval offered; Azure starts it at NotBefore" in out
    assert "the rule says approve, but the event has started: nothing to approve" in out


def test_an_event_from_the_store_shows_what_was_recorded(cfg: str, sim: Simulator) -> None:
    eid = sim.schedule("Reboot")
    assert run("once", "--config", cfg)[0] == 0
    code, out, err = run("policy", "explain", "--config", cfg, eid.lower(), "--at", MONDAY_NOON)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith('recorded decision: ask: rule "reboots", when first seen at ')
    assert lines[1] == "explained at the time given (--at), on the event as it is now:"
    assert "  rule: reboots" in lines
    # The same rule at that time, so no note that it differs.
    assert "the recorded decision is the one that counts" not in out
    code, out, _ = run("policy", "explain", "--config", cfg, eid, "--at", SATURDAY_NIGHT)
    assert out.splitlines()[-1] == (
        "the recorded decision is the one that counts for this event: the rules, the time "
        "or the event changed since it was decided"
    )
    sim.start_event(eid)
    assert run("once", "--config", cfg)[0] == 0
    code, out, _ = run("policy", "explain", "--config", cfg, eid, "--now")
    assert out.splitlines()[1] == "explained as of now, on the event as it is now (--now):"
    assert "Reboot, Started" in out
    code, out, _ = run("policy", "explain", "--config", cfg, eid, "--at", SATURDAY_NIGHT)
    assert out.splitlines()[-1].endswith(
        "the rules, the time or the event (it has started) changed since it was decided"
    )
    # By default: as of when it was decided, on the event as first seen (Scheduled then).
    code, out, _ = run("policy", "explain", "--config", cfg, eid)
    assert "Reboot, Scheduled" in out and "decision: ask: a person decides" in out
    assert "the recorded decision is the one that counts" not in out


def test_the_leads_an_events_notice_can_never_reach_are_named(
    tmp_path: Path, sim: Simulator
) -> None:
    """A 900 s `remind` and a 700 s `remind_after` cannot come for a Redeploy with 10
    minutes' notice: explain names them, counted from the event's first sight."""
    rules = '[[policy.rules]]\naction = "ask"\nremind = [900, 120]\nremind_after = [700, 60]\n'
    path = write_config(
        tmp_path / "sebridge.toml",
        endpoint=sim.url,
        db=tmp_path / "state.db",
        vm_name="vm0",
        extra=rules,
    )
    eid = sim.schedule("Redeploy", notice=600)
    assert run("once", "--config", str(path))[0] == 0
    code, out, err = run("policy", "explain", "--config", str(path), eid)
    assert code == 0, err
    lines = out.splitlines()
    assert (
        "  reminders: 900 s, 120 s before NotBefore; 60 s, 700 s after it was first announced, "
        "while nobody approved it or its approval is held"
    ) in lines
    said = [line for line in lines if "can never come" in line]
    assert len(said) == 1, lines
    notice, leads = said[0].split(" s after it was first announced): ")
    assert notice.startswith("  reminders that can never come (NotBefore is ")
    assert 590 <= int(notice.rpartition(" ")[2]) <= 600  # the simulator's notice, from first sight
    assert leads == "900 s before NotBefore; 700 s after it was first announced"
    code, out, _ = run("policy", "explain", "--config", str(path), eid, "--json")
    assert json.loads(out)["unreachable_reminders"] == [{"remind": 900}, {"remind_after": 700}]


def test_builtin_rules_are_named_after_their_keys(tmp_path: Path, sim: Simulator) -> None:
    cfg = write_config(tmp_path / "b.toml", endpoint=sim.url, db=tmp_path / "b.db", vm_name="vm0")
    user = {**EVENT, "EventSource": "User"}
    code, out, _ = run(
        "policy", "explain", "--config", str(cfg), "--event", write(tmp_path, "u.json", user)
    )
    assert code == 0
    assert "built-in rules (no [[policy.rules]]" in out
    assert '  rule 1 "already started: nothing to approve": no match' in out
    assert "      status: Scheduled" in out
    assert '  rule 2 "user-initiated (approve_user_events)": matches' in out


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--event", "{missing}"], "cannot read {missing}: No such file or directory"),
        (
            ["--event", "{notjson}"],
            "{notjson}: not JSON: Expecting value: line 1 column 1 (char 0)",
        ),
        (
            ["--event", "{array}"],
            "{array}: neither an event (an object with EventId) nor a Scheduled Events document (an object with Events)",
        ),
        (
            ["--event", "{two}"],
            "{two}: the document holds 2 events; give one event (or a document with one)",
        ),
        (
            ["--event", "{none}"],
            "{none}: the document holds 0 events; give one event (or a document with one)",
        ),
        (
            ["--event", "{typeless}"],
            "{typeless}: IMDS event 602D9444-D2CD-49C7-8624-8643E7171297 has EventType missing or null, expected text",
        ),
        (
            ["UNKNOWN-ID"],
            "unknown event UNKNOWN-ID: not in the store (see `sebridge events --all`); sebridge has not run with this store yet",
        ),
        ([], "give an EVENT_ID (see `sebridge events`) or --event FILE.json"),
        (
            ["X", "--event", "{two}"],
            "give an EVENT_ID (see `sebridge events`) or --event FILE.json",
        ),
        (
            ["X", "--at", "tomorrow"],
            '--at "tomorrow" is no ISO 8601 time (e.g. 2024-05-04T02:30:00+02:00)',
        ),
    ],
)
def test_bad_input_is_exit_2_and_one_line(
    cfg: str, tmp_path: Path, args: list[str], said: str
) -> None:
    files = {
        "missing": str(tmp_path / "missing.json"),
        "notjson": write(tmp_path, "n.json", "Reboot tonight"),
        "array": write(tmp_path, "a.json", [EVENT]),
        "two": write(tmp_path, "t.json", {"DocumentIncarnation": 1, "Events": [EVENT, EVENT]}),
        "none": write(tmp_path, "z.json", {"DocumentIncarnation": 1, "Events": []}),
        "typeless": write(tmp_path, "y.json", {k: v for k, v in EVENT.items() if k != "EventType"}),
    }
    code, out, err = run("policy", "explain", "--config", cfg, *[a.format(**files) for a in args])
    assert (code, out) == (2, "")
    assert err.splitlines() == [f"sebridge: policy explain: {said.format(**files)}"]


def test_as_a_process(cfg: str, tmp_path: Path) -> None:
    result = run_cli(
        "policy",
        "explain",
        "--config",
        cfg,
        "--event",
        write(tmp_path, "e.json", EVENT),
        "--at",
        MONDAY_NOON,
    )
    assert result.returncode == 0, result.stderr
    assert "decision: ask" in result.stdout
    assert run_cli("policy").returncode == 2


_T0 = datetime(2024, 3, 9, 20, 0, tzinfo=UTC)
_POLICIES = [
    build_policy(PolicyConfig(only_this_vm=True)),
    build_policy(PolicyConfig(approve_user_events=False, approve_freeze_under_seconds=0)),
    build_policy(from_mapping({"policy": {"rules": []}, "hooks": {}}).policy),
    build_policy(
        from_mapping(
            {
                "policy": {
                    "rules": [
                        {"this_vm": False, "action": "ignore"},
                        {
                            "event_types": ["Freeze"],
                            "max_duration_seconds": 30,
                            "action": "approve",
                        },
                        {
                            "sources": ["User"],
                            "window": {"start": "21:00", "end": "02:00"},
                            "action": "approve",
                        },
                        {"description": "guest", "action": "inform"},
                    ]
                }
            }
        ).policy
    ),
]


@pytest.mark.parametrize("policy_number", range(len(_POLICIES)))
def test_explain_decides_as_decide(policy_number: int) -> None:
    policy = _POLICIES[policy_number]
    grid = itertools.product(
        ["Freeze", "Reboot"],
        ["Scheduled", "Started"],
        [("vm0",), ("vm1",)],
        ["Platform", "User"],
        [-1, 5, 60],
        ["Guest OS update", "Host"],
        range(0, 24, 3),
    )
    for kind, status, res, source, duration, text, hour in grid:
        event = ScheduledEvent(
            "E", kind, status, res, description=text, source=source, duration_seconds=duration
        )
        now = _T0 + timedelta(hours=hour)
        assert explain(event, policy, "vm0", now).decision == decide(event, policy, "vm0", now)


def test_without_vm_name_the_vm_is_the_one_imds_names(tmp_path: Path) -> None:
    """Never the host name: IMDS's compute name, as `run` learns it."""
    with Simulator(port=0, vm_name="vm1") as sim:
        cfg = write_config(tmp_path / "c.toml", endpoint=sim.url, db=tmp_path / "s.db", extra=RULES)
        code, out, err = run(
            "policy",
            "explain",
            "--config",
            str(cfg),
            "--event",
            write(tmp_path, "e.json", EVENT),
            "--json",
        )
    assert code == 0, err
    assert json.loads(out)["vm_name"] == "vm1"


@pytest.mark.slow
def test_without_vm_name_and_imds_the_vm_is_said_to_be_unknown(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    cfg = write_config(tmp_path / "c.toml", endpoint=dead, db=tmp_path / "s.db", extra=RULES)
    code, out, err = run(
        "policy", "explain", "--config", str(cfg), "--event", write(tmp_path, "e.json", EVENT)
    )
    assert (code, out) == (2, "")
    (line,) = err.splitlines()
    assert line.startswith(
        f"sebridge: policy explain: cannot learn this VM's name from IMDS at {dead}"
    )
    assert line.endswith(
        "set imds.vm_name to this VM's name as Scheduled Events' Resources list it, or give --vm-name"
    )


def test_last_nights_auto_approved_freeze_is_explained_as_it_was_decided(
    tmp_path: Path, sim: Simulator, store_url: str
) -> None:
    """Finding 8: next morning, a Freeze a night window approved is explained as approved
    (as of when it was first seen), not as what the rules say now."""
    now = datetime.now(UTC)
    start, end = now - timedelta(hours=1), now + timedelta(hours=1)
    rules = (
        "[[policy.rules]]\n"
        'name = "night freeze"\n'
        'event_types = ["Freeze"]\n'
        f'window = {{ start = "{start:%H:%M}", end = "{end:%H:%M}", timezone = "UTC" }}\n'
        'action = "approve"\n'
    )
    cfg = str(
        write_config(
            tmp_path / "n.toml", endpoint=sim.url, store_url=store_url, vm_name="vm0", extra=rules
        )
    )
    eid = sim.schedule("Freeze")
    assert run("once", "--config", cfg)[0] == 0
    code, out, err = run("policy", "explain", "--config", cfg, eid)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(
        f'recorded decision: approve: rule "night freeze", when first seen at {now:%Y-%m-%d %H:}'
    )
    assert lines[1].startswith("explained as of then, on the event as first seen")
    assert "      event_types: Freeze is one of Freeze" in lines
    assert any(line.startswith("      window: ") and " is inside " in line for line in lines)
    # A rule without prepare hooks approves at once: no hooks to wait for (issue 34, 12).
    assert "decision: approve at once" in lines
    assert "prepare hooks" not in out
    assert "the recorded decision is the one that counts" not in out
    # Next morning, as of then (--at): outside the window, so the rules would ask now.
    later = (now + timedelta(hours=12)).isoformat()
    code, out, _ = run("policy", "explain", "--config", cfg, eid, "--at", later)
    assert lines[0] == out.splitlines()[0]  # the recorded decision comes first, always
    assert "decision: ask: a person decides" in out and " is inside " not in out
    assert out.splitlines()[-1].startswith("the recorded decision is the one that counts")
    data = json.loads(run("policy", "explain", "--config", cfg, eid, "--json")[1])
    assert data["as_of"] == "first_seen"
    assert data["recorded"]["action"] == "approve" and data["recorded"]["rule"] == "night freeze"
    assert data["decision"]["action"] == "approve"
