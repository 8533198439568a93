"""The CLI on a deployed VM (issue 17, items 2 and 3): `events`, `history` and `approve`
need no sink's secrets; `check` from a shell reads the unit's credentials where the unit
takes them; `check` creates no store; Teams without approval links is valid, said once."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from helpers import cli_env, run_cli, toml_str, write_config
from sebridge.cli import commands
from sebridge.config.secrets import Secret
from sebridge.config.unit_credentials import UnitCredentials
from sebridge.imds.simulator import Simulator
from sebridge.integrations.registry import config_from_mapping
from sebridge.kernel.errors import ConfigError

WORKFLOWS = (
    "https://default0123.cd.environment.api.powerplatform.com/powerautomate/automations/direct"
    "/workflows/0123/triggers/manual/paths/invoke?sig=S3CR3TSIG"
)
# As the unit's comments tell a person to write them (deploy/systemd/sebridge.service).
SECRETS = """
[slack]
bot_token_file = "${CREDENTIALS_DIRECTORY}/sebridge_slack-bot-token"
app_token = "${SLACK_APP_TOKEN}"
channel = "C0123456789"
[teams]
webhook_url_file = "${CREDENTIALS_DIRECTORY}/sebridge_teams-url"
"""


def shell_env() -> dict[str, str]:
    """An operator's root shell: none of the service's variables."""
    env = cli_env()
    for name in ("CREDENTIALS_DIRECTORY", "SLACK_APP_TOKEN"):
        env.pop(name, None)
    return env


@pytest.mark.slow
def test_events_history_and_approve_need_no_sink_secrets(tmp_path: Path, sim: Simulator) -> None:
    db = tmp_path / "state.db"
    plain = write_config(tmp_path / "plain.toml", endpoint=sim.url, db=db)
    event_id = sim.schedule("Redeploy")
    assert run_cli("once", "--config", str(plain)).returncode == 0
    deployed = write_config(tmp_path / "deployed.toml", endpoint=sim.url, db=db, extra=SECRETS)

    shown = run_cli("events", "--config", str(deployed), "--json", env=shell_env())
    assert shown.returncode == 0, shown.stderr
    assert [e["event_id"] for e in json.loads(shown.stdout)] == [event_id]
    told = run_cli("history", "--config", str(deployed), env=shell_env())
    assert told.returncode == 0, told.stderr
    assert f"scheduled Redeploy  {event_id}" in told.stdout
    done = run_cli("approve", event_id, "--config", str(deployed), "--as", "ops", env=shell_env())
    assert done.returncode == 0, done.stderr
    assert "StartRequests sent to Azure" in done.stdout
    assert sim.start_requests == [event_id]
    # The approval is announced to the sinks the config turns on, though their secrets
    # were never read: Slack and Teams each owe a delivery.
    rows = run_cli("events", "--config", str(deployed), "--json", env=shell_env())
    (event,) = json.loads(rows.stdout)
    assert {d["sink"] for d in event["deliveries"]} >= {"slack", "teams"}


@pytest.mark.parametrize("command", ["run", "once", "check"])
def test_commands_that_send_still_refuse_unreadable_secrets(tmp_path: Path, command: str) -> None:
    config = write_config(
        tmp_path / "c.toml", endpoint="http://127.0.0.1:9", db=tmp_path / "s.db", extra=SECRETS
    )
    args = [command, "--config", str(config)]
    if command == "check":  # no credentials folder to fall back to either
        args += ["--credentials", str(tmp_path / "absent")]
    done = run_cli(*args, env=shell_env(), timeout=30)
    assert done.returncode == 2
    assert "slack.bot_token_file: environment variable CREDENTIALS_DIRECTORY is not set" in (
        done.stderr
    )
    assert "slack.app_token: environment variable SLACK_APP_TOKEN is not set" in done.stderr
    assert not (tmp_path / "s.db").exists()


def test_check_from_a_shell_reads_the_units_credentials_folder(
    tmp_path: Path, sim: Simulator
) -> None:
    folder = tmp_path / "credentials"
    folder.mkdir(mode=0o700)
    (folder / "slack-bot-token").write_text("xoxb-1\n")
    (folder / "teams-url").write_text(WORKFLOWS + "\n")
    store = toml_str(f"sqlite:///{tmp_path / 's.db'}")
    config = tmp_path / "c.toml"
    teams = SECRETS.split("[teams]")[1]
    imds = f'[imds]\nvm_name = "vm0"\nendpoint = {toml_str(sim.url)}\n'
    config.write_text(f"{imds}[store]\nurl = {store}\n[teams]{teams}")
    done = run_cli("check", "--config", str(config), "--credentials", str(folder), env=shell_env())
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"ok: secrets: *_file paths under ${{CREDENTIALS_DIRECTORY}} read from {folder}" in (
        done.stdout
    )
    assert "ok: teams: webhook_url is a Workflows (Power Automate) webhook URL" in done.stdout
    assert "S3CR3TSIG" not in done.stdout + done.stderr
    # Inside the service CREDENTIALS_DIRECTORY is set: systemd's folder is read, not ours.
    service = tmp_path / "run-credentials"
    service.mkdir()
    (service / "sebridge_teams-url").write_text("https://teams.microsoft.com/l/channel/19%3a\n")
    env = {**shell_env(), "CREDENTIALS_DIRECTORY": str(service)}
    done = run_cli("check", "--config", str(config), "--credentials", str(folder), env=env)
    assert done.returncode == 2
    assert "teams.webhook_url_file: is a link to a Teams page" in done.stderr


def test_a_missing_credential_names_the_file_in_the_folder(tmp_path: Path) -> None:
    unit = UnitCredentials(str(tmp_path))
    assert unit.environ({})["CREDENTIALS_DIRECTORY"] == str(tmp_path)
    assert unit.locate(f"{tmp_path}/sebridge_jira-token") == f"{tmp_path}/jira-token"
    assert unit.locate(f"{tmp_path}/other_jira-token") == f"{tmp_path}/other_jira-token"
    assert unit.locate("/elsewhere/sebridge_x") == "/elsewhere/sebridge_x"
    assert unit.environ({"CREDENTIALS_DIRECTORY": "/run/credentials/sebridge.service"}) == {
        "CREDENTIALS_DIRECTORY": "/run/credentials/sebridge.service"
    }
    assert not UnitCredentials(str(tmp_path / "none")).applies({})
    with pytest.raises(
        ConfigError, match=rf'teams.webhook_url_file: cannot read "{tmp_path}/teams-url"'
    ):
        config_from_mapping(
            {"teams": {"webhook_url_file": "${CREDENTIALS_DIRECTORY}/sebridge_teams-url"}},
            environ=unit.environ({}),
            locate=unit.locate,
        )


def test_an_unread_secret_turns_its_integration_on_but_has_no_value() -> None:
    config = config_from_mapping(
        {
            "slack": {"bot_token": "${UNSET_TOKEN}", "app_token_file": "/nowhere", "channel": "C1"},
            "jira": {"url": "https://j.example.net", "pat_file": "/nowhere", "project": "OPS"},
            "teams": {"webhook_url": ""},
        },
        environ={},
        read_secrets=False,
    )
    slack = config.section("slack")
    assert slack.enabled and config.section("jira").enabled
    assert not config.section("teams").enabled
    assert str(slack.bot_token) == "***" and config.redacted()["slack"]["app_token"] == "***"
    with pytest.raises(ConfigError, match=r"slack\.bot_token was not read"):
        slack.bot_token.reveal()
    assert Secret.unread("a.b") != Secret("") and bool(Secret.unread("a.b"))
    # Shapes are still checked without secrets.
    with pytest.raises(ConfigError, match="set bot_token or bot_token_file, not both"):
        config_from_mapping(
            {"slack": {"bot_token": "x", "bot_token_file": "/y", "channel": "C1"}},
            environ={},
            read_secrets=False,
        )


@pytest.mark.slow
def test_check_says_a_missing_store_and_creates_nothing(tmp_path: Path, sim: Simulator) -> None:
    db = tmp_path / "var" / "lib" / "sebridge" / "state.db"
    config = write_config(tmp_path / "c.toml", endpoint=sim.url, db=db, vm_name="vm0")
    done = run_cli("check", "--config", str(config))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"ok: store: {db} does not exist yet; `sebridge run` creates it" in done.stdout
    for command in (["events"], ["history"], ["approve", "E1"]):
        shown = run_cli(*command, "--config", str(config))
        assert f"there is no store at {db} (is `sebridge run` running?)" in (
            shown.stdout + shown.stderr
        )
        assert shown.returncode == (3 if command[0] == "approve" else 0)
    assert not (tmp_path / "var").exists()


def test_teams_without_public_url_is_valid_and_check_says_links_are_off(
    tmp_path: Path, sim: Simulator
) -> None:
    config = config_from_mapping(
        {
            "imds": {"vm_name": "vm0", "endpoint": sim.url},
            "store": {"url": f"sqlite:///{tmp_path / 's.db'}"},
            "teams": {"webhook_url": WORKFLOWS},
        },
        environ={},
    )
    assert not config.warnings
    out = io.StringIO()
    assert commands.check(config, as_json=False, out=out) == 0
    said = out.getvalue()
    assert said.count("approval links are off") == 1
    assert "ok: teams: approval links are off (http.public_url is not set)" in said
    assert "problem" not in said and "warning" not in said


@pytest.mark.parametrize(
    "url",
    [
        "https://teams.microsoft.com/l/channel/19%3aabc%40thread.tacv2/General?groupId=1&tenantId=2",
        "https://teams.microsoft.com/l/chat/19:abc@unq.gbl.spaces/conversations",
        "https://make.powerautomate.com/environments/Default-1/flows/2/details",
    ],
)
def test_a_teams_page_link_is_refused_naming_the_key(tmp_path: Path, url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_mapping({"teams": {"webhook_url": url}}, environ={})
    said = str(caught.value)
    assert "teams.webhook_url: is a link to a Teams page" in said
    assert said.count("teams.webhook_url") == 1
    assert "thread.tacv2" not in said and "flows/2" not in said


def test_check_says_when_opening_the_store_wrote_its_schema(
    tmp_path: Path, store_url: str, sim: Simulator
) -> None:
    if store_url.startswith("sqlite"):  # a file that is there, but empty
        Path(store_url.removeprefix("sqlite:///")).touch()
    config = config_from_mapping(
        {"imds": {"vm_name": "vm0", "endpoint": sim.url}, "store": {"url": store_url}},
        environ={},
    )
    out = io.StringIO()
    assert commands.check(config, as_json=False, out=out) == 0
    (said,) = [line for line in out.getvalue().splitlines() if "created the tables" in line]
    assert said.startswith("ok: store: created the tables (schema version ")
    assert said.endswith(", as the daemon does at its start")
    again = io.StringIO()
    assert commands.check(config, as_json=False, out=again) == 0
    assert "store:" not in again.getvalue()  # nothing written the second time, nothing said
