"""Named instances of an integration ([slack.dba]) and what a config may say of them:
route_only, a rule's notify (fail closed), which integrations are configured once, each
instance's keys named as its own in problems, `check` and `policy explain` naming them.
Routing end to end on the fakes: tests/test_routing.py."""

from __future__ import annotations

import contextlib
import io
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from fakes.slack import FakeSlack
from fakes.teams import FakeTeams
from helpers import toml_str
from pages import section as page_section
from sebridge.cli.main import main
from sebridge.config.loader import Config
from sebridge.imds.simulator import Simulator
from sebridge.integrations import registry
from sebridge.integrations.base import Context, Core
from sebridge.integrations.registry import config_from_mapping
from sebridge.integrations.render import Renderer
from sebridge.kernel.errors import ConfigError
from sebridge.model.decision import Decision

SLACK = {"bot_token": "xoxb-1", "app_token": "xapp-1", "channel": "C1"}


def config(data: dict[str, Any], **environ: str) -> Config:
    return config_from_mapping(data, environ=environ)


def problem(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as raised:
        config(data)
    return str(raised.value)


def test_named_instances_sit_beside_the_unnamed_one_in_registry_order() -> None:
    c = config(
        {
            "slack": {**SLACK, "dba": {**SLACK, "channel": "C2", "route_only": True}},
            "jsonl": {"path": "-"},
        }
    )
    assert [i.name for i in registry.enabled(c)] == ["console", "jsonl", "slack", "slack.dba"]
    assert c.section("slack").channel == "C1" and c.section("slack.dba").channel == "C2"
    assert c.route_only == {"slack.dba"}
    assert c.redacted()["slack.dba"]["route"] == "named"  # route_only = true is its alias
    assert "route" not in c.redacted()["slack"]


def test_a_section_of_named_instances_alone_has_no_unnamed_one() -> None:
    c = config({"slack": {"dba": SLACK}})
    assert [i.name for i in registry.enabled(c)] == ["console", "slack.dba"]
    assert "slack" not in c.given and "slack.dba.channel" in c.given


def test_each_instance_has_its_own_secret_from_its_own_variable() -> None:
    c = config(
        {"slack": {**SLACK, "dba": {**SLACK, "bot_token": "${DBA_SLACK_TOKEN}"}}},
        DBA_SLACK_TOKEN="xoxb-dba",
    )
    assert c.section("slack").bot_token.reveal() == "xoxb-1"
    assert c.section("slack.dba").bot_token.reveal() == "xoxb-dba"
    said = problem({"slack": {**SLACK, "dba": {**SLACK, "bot_token": "${DBA_SLACK_TOKEN}"}}})
    assert "slack.dba.bot_token: environment variable DBA_SLACK_TOKEN is not set" in said


def test_an_instances_problems_name_its_own_keys() -> None:
    said = problem({"jira": {"change": {"url": "https://jira.example.com", "pat": "p"}}})
    assert "jira.change.project is empty" in said
    assert "jira.project" not in said
    said = problem({"slack": {"dba": {**SLACK, "nonsense": 1}}})
    assert 'unknown key "nonsense" in [slack.dba]' in said and "route_only" in said


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"console": {"ops": {"enabled": True}}}, "[console.ops]: console is configured once"),
        (
            {"kubernetes": {"node": {"enabled": True}}},
            "[kubernetes.node]: kubernetes is configured once",
        ),
        ({"slack": {"DBA": SLACK}}, "[slack.DBA]: an instance's name is a lower-case letter"),
        ({"slack": {**SLACK, "route_only": "yes"}}, "slack.route_only: expected true or false"),
        (
            {"policy": {"rules": [{"action": "ask", "notify": ["pagerduty"]}]}},
            'policy.rules[1].notify: "pagerduty": no integration is named pagerduty',
        ),
        (
            {"policy": {"rules": [{"action": "ask", "notify": ["slak.dba"]}]}},
            'no integration is named slak (did you mean "slack"?)',
        ),
        (
            {"policy": {"rules": [{"action": "ask", "notify": ["teams"]}]}},
            'policy.rules[1].notify: "teams" is not configured: no [teams] section',
        ),
        (
            {
                "slack": {"dba": SLACK},
                "policy": {"rules": [{"action": "ask", "notify": ["slack"]}]},
            },
            '"slack" is not configured: no [slack] section',
        ),
        (
            {
                "console": {"enabled": False},
                "policy": {"rules": [{"action": "ask", "notify": ["console"]}]},
            },
            '"console" is configured but not enabled',
        ),
        (
            {"policy": {"rules": [{"action": "ask", "notify": []}]}},
            "policy.rules[1].notify: an empty list sends the rule's events nowhere",
        ),
    ],
)
def test_what_a_config_may_not_say_of_instances(data: dict[str, Any], expected: str) -> None:
    assert expected in problem(data)


def test_a_route_only_instance_no_rule_names_is_a_warning() -> None:
    c = config({"slack": {**SLACK, "route_only": True}})
    assert (
        'slack.route "named" (route_only): no rule names slack in notify, so it hears nothing'
    ) in c.warnings
    routed = config(
        {
            "slack": {**SLACK, "route_only": True},
            "policy": {"rules": [{"action": "ask", "notify": ["slack"]}]},
        }
    )
    assert not [w for w in routed.warnings if "route" in w]


def test_each_slack_instance_in_http_mode_has_its_own_path() -> None:
    http = {"bot_token": "xoxb-1", "signing_secret": "s" * 32, "channel": "C1"}
    c = config({"slack": {**http, "dba": {**http, "signing_secret": "t" * 32}}})
    paths = {}
    for instance in registry.enabled(c):
        ctx = registry.context(instance, c, Renderer())
        paths[instance.name] = ctx.path("slack", "events")
    assert paths == {
        "console": "/slack/events",
        "slack": "/slack/events",
        "slack.dba": "/slack/dba/events",
    }
    assert (
        Context(None, Core(), Renderer(), instance="slack.web").path("slack", "x") == "/slack/web/x"
    )


def _check(tmp_path: Path, sections: str, *extra: str) -> tuple[int, str]:
    store = toml_str(f"sqlite:///{tmp_path / 'state.db'}")
    path = tmp_path / "sebridge.toml"
    out, err = io.StringIO(), io.StringIO()
    # check asks IMDS always (with vm_name set, for its compute name too): a simulator
    # of this VM answers.
    with Simulator(port=0, vm_name="vm7") as imds:
        endpoint = toml_str(imds.url)
        path.write_text(
            f'[imds]\nendpoint = {endpoint}\nvm_name = "vm7"\n[store]\nurl = {store}\n{sections}'
        )
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["check", "--config", str(path), *extra])
    return code, out.getvalue() + err.getvalue()


def _slack(fake: FakeSlack, name: str) -> str:
    return (
        f"[{name}]\nbot_token = {toml_str(fake.bot_token)}\n"
        f'app_token = {toml_str(fake.app_token)}\nchannel = "C0123456789"\n'
        f"api_url = {toml_str(fake.url)}\n"
    )


@pytest.mark.usefixtures("hermetic")
def test_check_names_the_instance_in_every_line_and_tests_each(
    tmp_path: Path, slack: FakeSlack, teams: FakeTeams
) -> None:
    sections = (
        _slack(slack, "slack")
        + _slack(slack, "slack.dba")
        + f"[teams.web]\nwebhook_url = {toml_str(teams.workflows_url)}\n"
        + "[console]\nenabled = false\n"
    )
    code, out = _check(tmp_path, sections, "--send-test")
    assert code == 0, out
    assert "sinks: slack, slack.dba, teams.web" in out
    posted = sorted(slack.messages.values(), key=lambda m: m.ts)
    assert len(posted) == 2  # one test message per instance
    said = [line for line in out.splitlines() if "test message posted" in line]
    assert [line.split(":")[1].strip() for line in said] == ["slack", "slack.dba"]
    assert {line.rsplit("(ts ", 1)[1] for line in said} == {f"{m.ts})" for m in posted}
    assert "ok: teams.web: test card accepted by the webhook (HTTP 202)" in out
    integration_lines = [
        line
        for line in out.splitlines()
        if line.startswith(("ok: slack", "ok: teams", "problem: slack", "problem: teams"))
    ]
    assert integration_lines
    assert all(
        line.split(": ")[1] in ("slack", "slack.dba", "teams.web") for line in integration_lines
    )
    code, out = _check(tmp_path, sections, "--json")
    assert code == 0, out
    assert "slack.dba" in json.loads(out)["config"]


@pytest.mark.usefixtures("hermetic")
def test_policy_explain_says_where_the_event_goes(tmp_path: Path) -> None:
    store = toml_str(f"sqlite:///{tmp_path / 'state.db'}")
    path = tmp_path / "sebridge.toml"
    path.write_text(
        f'[imds]\nvm_name = "vm0"\n[store]\nurl = {store}\n[console]\nenabled = false\n'
        '[jsonl]\npath = "-"\n[jsonl.audit]\npath = "-"\nroute_only = true\n'
        '[[policy.rules]]\nevent_types = ["Reboot"]\naction = "ask"\nnotify = ["jsonl.audit"]\n'
        '[[policy.rules]]\naction = "inform"\n'
    )
    event = tmp_path / "e.json"
    for kind, line in [
        ("Reboot", "  sinks: jsonl.audit (the rule's notify)"),
        ("Freeze", '  sinks: jsonl (the rule has no notify: every instance not route "named")'),
    ]:
        event.write_text(
            json.dumps(
                {
                    "EventId": "E1",
                    "EventType": kind,
                    "ResourceType": "VirtualMachine",
                    "Resources": ["vm0"],
                    "EventStatus": "Scheduled",
                    "NotBefore": "Mon, 11 Mar 2024 12:00:00 GMT",
                    "Description": "",
                    "EventSource": "Platform",
                    "DurationInSeconds": 7,
                }
            )
        )
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["policy", "explain", "--config", str(path), "--event", str(event)])
        assert code == 0
        assert line in out.getvalue().splitlines()


def test_the_docs_example_of_named_instances_is_a_valid_config(tmp_path: Path) -> None:
    section = page_section("channels/index.md", "Named instances: several channels, routed by rule")
    (example,) = re.findall(r"```toml\n(.*?)```", section, re.S)
    (tmp_path / "sebridge_teams-change-webhook").write_text(
        "https://example.webhook.office.com/webhookb2/x"
    )
    environ = {
        "SLACK_BOT_TOKEN": "xoxb-1",
        "SLACK_APP_TOKEN": "xapp-1",
        "DBA_SLACK_TOKEN": "xoxb-2",
        "DBA_SLACK_APP_TOKEN": "xapp-2",
        "CREDENTIALS_DIRECTORY": str(tmp_path),
    }
    c = config_from_mapping(tomllib.loads(example), environ=environ)
    assert registry.sink_names(c) == ["console", "slack", "slack.dba", "teams.change"]
    audience = registry.audience(c)
    rules = {r.name: r for r in c.policy.rules}
    assert rules["database VMs"].notify == ("slack.dba",)
    decide = {name: Decision(r.action, name, notify=r.notify) for name, r in rules.items()}
    assert audience(decide["database VMs"]) == ("slack.dba",)
    assert audience(decide["what needs a person"]) == ("slack", "teams.change")
    assert audience(decide["the rest"]) == ("console", "slack", "slack.dba")


@pytest.mark.usefixtures("hermetic")
def test_a_finding_about_a_key_names_the_instances_key(tmp_path: Path) -> None:
    lines = tmp_path / "nowhere" / "events.jsonl"
    code, out = _check(tmp_path, f"[jsonl.audit]\npath = {toml_str(str(lines))}\n")
    assert code == 1, out
    assert f"problem: jsonl.audit.path: the folder {lines.parent} does not exist" in out
    assert f"warning: jsonl.audit.path: the folder {lines.parent} does not exist" in out
