"""[[policy.rules]] and [hooks.<name>] in the config: what is read, and every refusal as one
line naming the key, through `sebridge check` (the CLI, in this process and as a process)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from helpers import cli_main, run_cli
from sebridge.config.loader import HookSettings, from_mapping
from sebridge.config.policy import RuleSettings, WindowSettings
from sebridge.imds.simulator import Simulator
from sebridge.kernel.errors import ConfigError

pytestmark = pytest.mark.usefixtures("cli_in_process")
# How every refused pattern ends: what the engine cannot do.
RE2_NOTE = " (patterns are matched by RE2, in linear time: no backreferences or lookaround)"


@pytest.fixture
def script(tmp_path: Path) -> str:
    path = tmp_path / "drain.sh"
    path.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    path.chmod(0o755)
    return str(path)


def check(tmp_path: Path, text: str, imds: str = "http://127.0.0.1:9") -> tuple[int, str, str]:
    """`sebridge check` on a file holding `text` (store in tmp_path), in this process;
    IMDS at `imds` (check asks it for Scheduled Events and the VM's name)."""
    path = tmp_path / "sebridge.toml"
    store = (
        f'[imds]\nvm_name = "vm0"\nendpoint = "{imds}"\n'
        f'[store]\nurl = "sqlite:///{tmp_path}/state.db"\n'
    )
    path.write_text(store + text, encoding="utf-8")
    return cli_main("check", "--config", str(path))


def test_rules_and_hooks_are_read_in_order(script: str) -> None:
    config = from_mapping(
        {
            "policy": {
                "prepare_lead_seconds": 120,
                "rules": [
                    {
                        "name": "quiet",
                        "event_types": ["Reboot"],
                        "sources": ["Platform", "User"],
                        "min_duration_seconds": 0,
                        "max_duration_seconds": 60,
                        "this_vm": True,
                        "description": "maint",
                        "window": {"days": ["sat"], "start": "22:00", "end": "04:00"},
                        "action": "approve",
                        "prepare": ["drain"],
                        "recover": ["drain"],
                        "on_prepare_failure": "approve",
                    },
                    {"action": "ask", "remind": [60, 600], "remind_after": [900, 300, 900]},
                ],
            },
            "hooks": {"drain": {"command": [script, "--grace", "60"], "timeout": 30}},
        }
    )
    assert config.policy.prepare_lead_seconds == 120
    assert config.policy.rules == (
        RuleSettings(
            name="quiet",
            event_types=("Reboot",),
            sources=("Platform", "User"),
            min_duration_seconds=0,
            max_duration_seconds=60,
            this_vm=True,
            description="maint",
            window=WindowSettings(days=("sat",), start="22:00", end="04:00", timezone="UTC"),
            action="approve",
            prepare=("drain",),
            recover=("drain",),
            on_prepare_failure="approve",
        ),
        # remind in the order they come: descending; remind_after: ascending, once each.
        RuleSettings(name="rule 2", action="ask", remind=(600, 60), remind_after=(300, 900)),
    )
    assert config.hooks == {"drain": HookSettings("drain", (script, "--grace", "60"), 30.0)}
    assert config.warnings == ()


def test_an_approve_rule_whose_hooks_can_hold_its_event_may_remind() -> None:
    """A held approval is reminded of (Azure starts the event at NotBefore anyway): an
    "approve" rule with prepare hooks that hold may set reminders; one that cannot hold
    (on_prepare_failure "approve") may not."""
    rule = {"action": "approve", "prepare": ["t"], "remind": [300], "remind_after": [600]}
    config = from_mapping({"policy": {"rules": [rule]}, "hooks": {"t": {"command": ["true"]}}})
    assert (config.policy.rules[0].remind, config.policy.rules[0].remind_after) == ((300,), (600,))
    never_held = {**rule, "on_prepare_failure": "approve"}
    problem = _problem({"policy": {"rules": [never_held]}, "hooks": {"t": {"command": ["true"]}}})
    assert "policy.rules[1].remind: only" in problem and "policy.rules[1].remind_after" in problem


def test_a_bare_hook_command_is_found_on_path() -> None:
    config = from_mapping(
        {
            "policy": {"rules": [{"action": "ask", "prepare": ["t"]}]},
            "hooks": {"t": {"command": ["true"]}},
        }
    )
    assert config.hooks["t"].command == ("true",) and config.hooks["t"].timeout == 300.0


def test_defaults_have_no_rules_and_a_300_s_lead() -> None:
    config = from_mapping({})
    assert (config.policy.rules, config.policy.prepare_lead_seconds, config.hooks) == ((), 300, {})


def test_a_hook_no_rule_names_is_a_warning(script: str) -> None:
    config = from_mapping({"hooks": {"spare": {"command": [script]}}})
    assert config.warnings == ("hooks.spare: no rule names it, so it never runs",)


def _problem(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        from_mapping(data, source="f.toml")
    return str(caught.value)


def _rule(**rule: Any) -> dict[str, Any]:
    return {"policy": {"rules": [{"action": "ask", **rule}]}}


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (
            _rule(description="(unclosed"),
            "policy.rules[1].description: bad regular expression: missing ): (unclosed" + RE2_NOTE,
        ),
        (
            _rule(window={"timezone": "Mars/Olympus"}),
            'policy.rules[1].window.timezone: unknown time zone "Mars/Olympus" (e.g. Europe/Berlin)',
        ),
        (
            _rule(window={"timezone": "../../etc/passwd"}),
            'policy.rules[1].window.timezone: unknown time zone "../../etc/passwd" (e.g. Europe/Berlin)',
        ),
        (
            _rule(window={"start": "25:00"}),
            'policy.rules[1].window.start: expected a time as "HH:MM" (00:00 to 24:00), got "25:00"',
        ),
        (
            _rule(window={"start": "03:00", "end": "03:00"}),
            'policy.rules[1].window.end: equals start: for the whole day use start "00:00", end "24:00"',
        ),
        (
            _rule(window={"days": ["monday"]}),
            'policy.rules[1].window.days: must be one of mon, tue, wed, thu, fri, sat, sun; got "monday" (did you mean "mon"?)',
        ),
        (
            _rule(window={"days": []}),
            "policy.rules[1].window.days: empty: the window would never open; leave days out for every day",
        ),
        (
            _rule(window={"from": "01:00"}),
            'unknown key "from" in [policy.rules[1].window]; known keys: days, start, end, timezone',
        ),
        (
            _rule(prepare=["drain"]),
            'policy.rules[1].prepare: no hook "drain" ([hooks.drain]; defined: none)',
        ),
        (
            _rule(on_prepare_failure="approved"),
            'policy.rules[1].on_prepare_failure: must be one of hold, approve; got "approved" (did you mean "approve"?)',
        ),
        (
            {"policy": {"rules": [{"action": "notify"}]}},
            'policy.rules[1].action: must be one of approve, ask, inform, ignore; got "notify"',
        ),
        (
            {"policy": {"rules": [{"name": "x"}]}},
            "policy.rules[1].action: required: one of approve, ask, inform, ignore",
        ),
        (
            _rule(sources=["Users"]),
            'policy.rules[1].sources: must be one of Platform, User; got "Users" (did you mean "User"?)',
        ),
        (
            _rule(min_duration_seconds=10, max_duration_seconds=5),
            "policy.rules[1].min_duration_seconds: 10 is above max_duration_seconds (5)",
        ),
        (
            _rule(max_duration_seconds=-1),
            "policy.rules[1].max_duration_seconds: must be >= 0, got -1",
        ),
        (_rule(this_vm="yes"), 'policy.rules[1].this_vm: expected true or false, got "yes"'),
        (
            _rule(remind=[600, "120"]),
            'policy.rules[1].remind: "120" is not a duration: give seconds (600) or a number and a unit',
        ),
        (
            _rule(remind_after=[0]),
            "policy.rules[1].remind_after: must be >= 1, got 0",
        ),
        (
            {"policy": {"rules": [{"action": "approve", "remind": [60]}]}},
            'policy.rules[1].remind: only an "ask" event, or an "approve" one whose prepare '
            'hooks can hold it (on_prepare_failure "hold"), is reminded of (action is "approve")',
        ),
        (
            {"policy": {"rules": [{"action": "inform", "remind_after": [60]}]}},
            'policy.rules[1].remind_after: only an "ask" event, or an "approve" one whose '
            'prepare hooks can hold it (on_prepare_failure "hold"), is reminded of '
            '(action is "inform")',
        ),
        (
            _rule(evnet_types=["Reboot"]),
            'unknown key "evnet_types" in [policy.rules[1]] (did you mean "event_types"?)',
        ),
        (
            {"policy": {"rules": {"action": "ask"}}},
            "policy.rules: expected an array of tables, got a table",
        ),
        ({"policy": {"rules": ["ask"]}}, "[policy.rules[1]] must be a table, got str"),
        (
            {
                "policy": {
                    "rules": [{"action": "ask", "name": "a"}, {"action": "ignore", "name": "a"}]
                }
            },
            'policy.rules[2].name: "a" is also the name of rule 1',
        ),
        (
            {
                "policy": {
                    "only_this_vm": True,
                    "approve_user_events": False,
                    "rules": [{"action": "ask"}],
                }
            },
            "policy.approve_user_events, policy.only_this_vm: set together with [[policy.rules]]",
        ),
        (
            {"hooks": {"drain": {"command": []}}},
            'hooks.drain.command: required: the program and its arguments, e.g. ["drain"]',
        ),
        (
            {"hooks": {"drain": {"timeout": 5}}},
            'hooks.drain.command: required: the program and its arguments, e.g. ["drain"]',
        ),
        (
            {"hooks": {"drain": {"command": ["", "x"]}}},
            "hooks.drain.command: the program (its first item) is empty",
        ),
        (
            {"hooks": {"drain": {"command": ["no-such-program-here"]}}},
            'hooks.drain.command: "no-such-program-here" is not an executable file on PATH; give its full path',
        ),
        (
            {"hooks": {"drain": {"command": "/bin/true"}}},
            'hooks.drain.command: expected a list of strings, got "/bin/true"',
        ),
        (
            {"hooks": {"drain": {"command": ["/bin/true"], "timeout": 0}}},
            "hooks.drain.timeout: must be > 0, got 0",
        ),
        (
            {"hooks": {"drain": {"command": ["/bin/true"], "shell": True}}},
            'unknown key "shell" in [hooks.drain]',
        ),
        (
            {"hooks": {"drain": "/bin/true"}},
            'hooks.drain: expected a table, e.g. [hooks.drain] command = ["/usr/local/bin/drain"]',
        ),
        (
            {"policy": {"prepare_lead_seconds": -5}},
            "policy.prepare_lead_seconds: must be >= 0 (a day), got -5",
        ),
    ],
)
def test_each_bad_rule_or_hook_is_one_line_naming_the_key(data: dict[str, Any], line: str) -> None:
    problem = _problem(data)
    assert problem.startswith("f.toml: "), problem
    assert line in problem, problem
    assert "\n" not in problem, problem


def test_a_hook_command_that_is_not_executable(tmp_path: Path) -> None:
    plain = tmp_path / "drain.sh"
    plain.write_text("#!/bin/sh\n", encoding="utf-8")
    plain.chmod(0o644)
    line = _problem({"hooks": {"drain": {"command": [str(plain)]}}})
    assert line == f'f.toml: hooks.drain.command: "{plain}" is not executable (chmod +x)'
    folder = _problem({"hooks": {"drain": {"command": [str(tmp_path)]}}})
    assert folder == f'f.toml: hooks.drain.command: "{tmp_path}" is not a file'


def test_every_problem_is_reported_at_once() -> None:
    problem = _problem(
        {
            "policy": {
                "rules": [
                    {"action": "ask", "description": "("},
                    {"action": "ask", "window": {"timezone": "Nowhere"}, "recover": ["up"]},
                ]
            }
        }
    )
    lines = problem.splitlines()
    assert lines[0] == "f.toml: 3 problems:"
    assert [line.split(":")[0] for line in lines[1:]] == [
        "  - policy.rules[1].description",
        "  - policy.rules[2].window.timezone",
        "  - policy.rules[2].recover",
    ]


# -- sebridge check refuses them -------------------------------------------------------------

_CHECKED = [
    (
        '[[policy.rules]]\naction = "ask"\ndescription = "[a-"\n',
        "policy.rules[1].description: bad regular expression",
    ),
    (
        '[[policy.rules]]\naction = "ask"\nwindow = { timezone = "Europe/Berlín" }\n',
        'policy.rules[1].window.timezone: unknown time zone "Europe/Berlín"',
    ),
    (
        '[[policy.rules]]\naction = "ask"\nprepare = ["drain"]\n',
        'policy.rules[1].prepare: no hook "drain"',
    ),
    (
        '[[policy.rules]]\naction = "ask"\nprepare = ["d"]\n[hooks.d]\ncommand = ["/etc"]\n',
        'hooks.d.command: "/etc" is not a file',
    ),
    (
        '[[policy.rules]]\naction = "approve"\non_prepare_failure = "continue"\n',
        "policy.rules[1].on_prepare_failure: must be one of hold, approve",
    ),
    (
        '[[policy.rules]]\naction = "allow"\n',
        "policy.rules[1].action: must be one of approve, ask, inform, ignore",
    ),
    (
        '[policy]\napprove_freeze_under_seconds = 5\n[[policy.rules]]\naction = "ask"\n',
        "policy.approve_freeze_under_seconds: set together with [[policy.rules]]",
    ),
    (
        '[[policy.rules]]\naction = "ask"\nevent_type = ["Reboot"]\n',
        'unknown key "event_type" in [policy.rules[1]] (did you mean "event_types"?)',
    ),
]


@pytest.mark.parametrize(("text", "line"), _CHECKED)
def test_check_refuses_with_one_line_naming_the_key(tmp_path: Path, text: str, line: str) -> None:
    code, out, err = check(tmp_path, text)
    assert (code, out) == (2, ""), err
    (said,) = err.splitlines()
    assert said.startswith(f"sebridge: configuration error: {tmp_path}/sebridge.toml: {line}")


def test_check_passes_good_rules(tmp_path: Path, script: str, sim: Simulator) -> None:
    code, out, err = check(
        tmp_path,
        f'[[policy.rules]]\naction = "approve"\nprepare = ["drain"]\n'
        f'window = {{ days = ["sun"], start = "22:00", end = "04:00", timezone = "Asia/Tokyo" }}\n'
        f'[hooks.drain]\ncommand = ["{script}"]\n',
        sim.url,
    )
    assert code == 0, out + err
    assert "valid" in out.splitlines()[0]


def test_check_as_a_process_refuses_a_bad_regular_expression(tmp_path: Path) -> None:
    path = tmp_path / "sebridge.toml"
    path.write_text('[[policy.rules]]\naction = "ask"\ndescription = "*reboot"\n', encoding="utf-8")
    result = run_cli("check", "--config", str(path), env={**os.environ, "SEBRIDGE_CONFIG": ""})
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"sebridge: configuration error: {path}: policy.rules[1].description: bad regular "
        "expression: no argument for repetition operator: *" + RE2_NOTE
    )


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        (r"(maint)\1", r"invalid escape sequence: \1"),  # a backreference
        ("(?=maint)", "invalid perl operator: (?="),  # lookahead
        ("(?<!x)maint", "invalid perl operator: (?<!"),  # lookbehind
    ],
)
def test_what_needs_backtracking_is_refused_naming_why(pattern: str, why: str) -> None:
    problem = _problem(_rule(description=pattern))
    assert (
        problem == f"f.toml: policy.rules[1].description: bad regular expression: {why}" + RE2_NOTE
    )


def test_rules_after_one_that_matches_every_event_are_said_to_never_match() -> None:
    config = from_mapping(
        {
            "policy": {
                "rules": [
                    {"name": "user reboots", "action": "approve", "event_types": ["Reboot"]},
                    {"name": "everything else", "action": "ask"},
                    {"name": "terminate", "action": "inform", "event_types": ["Terminate"]},
                    {"action": "ignore", "this_vm": False},
                ]
            }
        }
    )
    assert config.warnings == (
        'policy.rules[3] ("terminate"): never matches: policy.rules[2] ("everything else") '
        "before it matches every event",
        'policy.rules[4] ("rule 4"): never matches: policy.rules[2] ("everything else") '
        "before it matches every event",
    )


def test_a_catch_all_rule_last_is_no_warning() -> None:
    config = from_mapping(
        {
            "policy": {
                "rules": [
                    {"action": "approve", "event_types": ["Freeze"], "window": {"days": ["sat"]}},
                    {"action": "ask"},
                ]
            }
        }
    )
    assert config.warnings == ()


@pytest.mark.parametrize(("environ", "state"), [({}, "not set"), ({"NODE_NAME": ""}, "empty")])
def test_an_unset_variable_in_a_hook_command_is_an_error_naming_it(
    environ: dict[str, str], state: str
) -> None:
    data = {"hooks": {"drain": {"command": ["/bin/echo", "drain", "${NODE_NAME}"]}}}
    with pytest.raises(ConfigError) as caught:
        from_mapping(data, environ=environ, source="f.toml")
    assert str(caught.value) == (
        f"f.toml: hooks.drain.command: environment variable NODE_NAME is {state}: "
        "set it in the service's environment"
    )
    hooks = from_mapping(data, environ={"NODE_NAME": "node-1"}).hooks  # set: as written
    assert hooks["drain"].command == ("/bin/echo", "drain", "node-1")


@pytest.mark.parametrize(("environ", "state"), [({}, "not set"), ({"KUBE": ""}, "empty")])
def test_an_unset_variable_in_a_hook_env_value_is_an_error_naming_key_and_variable(
    environ: dict[str, str], state: str
) -> None:
    data = {"hooks": {"drain": {"command": ["/bin/true"], "env": {"KUBECONFIG": "${KUBE}/c"}}}}
    with pytest.raises(ConfigError) as caught:
        from_mapping(data, environ=environ, source="f.toml")
    assert str(caught.value) == (
        f"f.toml: hooks.drain.env.KUBECONFIG: environment variable KUBE is {state}: "
        "set it in the service's environment"
    )


@pytest.mark.parametrize("where", ["command", "env"])
def test_a_sebridge_variable_in_a_hook_is_said_to_be_the_hooks_own(where: str) -> None:
    hook: dict[str, object] = {"command": ["/bin/echo", "drain", "${SEBRIDGE_EVENT_ID}"]}
    if where == "env":
        hook = {"command": ["/bin/true"], "env": {"EVENT": "${SEBRIDGE_EVENT_ID}"}}
    with pytest.raises(ConfigError) as caught:
        from_mapping({"hooks": {"drain": hook}}, environ={}, source="f.toml")
    said = str(caught.value)
    key = "hooks.drain.command" if where == "command" else "hooks.drain.env.EVENT"
    assert said.startswith(f"f.toml: {key}: environment variable SEBRIDGE_EVENT_ID is not set: ")
    assert "given to the hook when it runs, not to the config" in said
    assert "service's environment" not in said


def test_a_hooks_env_and_inherit_env_are_read() -> None:
    hook = from_mapping(
        {
            "hooks": {
                "drain": {
                    "command": ["/bin/true"],
                    "env": {"KUBECONFIG": "${KUBE}/config", "POOL": "web", "PRICE": "$$5"},
                    "inherit_env": ["HTTPS_PROXY", "NO_PROXY"],
                }
            }
        },
        environ={"KUBE": "/etc/kube"},
    ).hooks["drain"]
    assert hook.env == {"KUBECONFIG": "/etc/kube/config", "POOL": "web", "PRICE": "$5"}
    assert hook.inherit_env == ("HTTPS_PROXY", "NO_PROXY")
    assert from_mapping({"hooks": {"d": {"command": ["/bin/true"]}}}).hooks["d"].env == {}


@pytest.mark.parametrize(
    ("hook", "line"),
    [
        (
            {"env": "KUBECONFIG=/x"},
            'hooks.drain.env: expected a table of strings, e.g. { A = "b" }, got "KUBECONFIG=/x"',
        ),
        (
            {"env": {"RETRIES": 3}},
            'hooks.drain.env: expected a table of strings, e.g. { A = "b" }, got a table',
        ),
        ({"env": {"A": {"B": "c"}}}, "hooks.drain.env: expected a table of strings"),
        ({"env": {"1X": "y"}}, 'hooks.drain.env: "1X" is not a variable name'),
        ({"env": {"A-B": "y"}}, 'hooks.drain.env: "A-B" is not a variable name'),
        (
            {"env": {"SEBRIDGE_EVENT_ID": "y"}},
            'hooks.drain.env: "SEBRIDGE_EVENT_ID" is sebridge\'s own',
        ),
        ({"env": {"A": "x\x00y"}}, "hooks.drain.env.A: contains a NUL character"),
        (
            {"inherit_env": "KUBECONFIG"},
            'hooks.drain.inherit_env: expected a list of strings, got "KUBECONFIG"',
        ),
        ({"inherit_env": [1]}, "hooks.drain.inherit_env: expected a list of strings, got a list"),
        (
            {"inherit_env": ["KUBE CONFIG"]},
            'hooks.drain.inherit_env: "KUBE CONFIG" is not a variable name',
        ),
        (
            {"inherit_env": ["sebridge_hook"]},
            'hooks.drain.inherit_env: "sebridge_hook" is sebridge\'s own',
        ),
        (
            {"env": {"A": "b"}, "inherit_env": ["A"]},
            'hooks.drain.inherit_env: "A" is also set in env; keep one',
        ),
    ],
)
def test_a_bad_hook_environment_is_one_line_naming_the_key(hook: dict[str, Any], line: str) -> None:
    problem = _problem({"hooks": {"drain": {"command": ["/bin/true"], **hook}}})
    assert line in problem, problem
    assert "\n" not in problem, problem
