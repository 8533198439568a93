"""[teams] in the configuration: the URL's scheme and kind against the format, and check."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from sebridge.cli import commands
from sebridge.imds.simulator import Simulator
from sebridge.integrations.registry import config_from_mapping as from_mapping
from sebridge.integrations.teams.settings import CONNECTOR, OTHER, WORKFLOWS, url_kind
from sebridge.kernel.errors import ConfigError

SIG = "Zq9xY8w7VvUu6Tt5Ss4Rr3Qq2Pp1Oo0Nn_-AaBbCcD"
LOGIC = (
    "https://prod-27.westeurope.logic.azure.com:443/workflows/0123456789abcdef0123456789abcdef"
    f"/triggers/manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig={SIG}"
)
POWER = (
    "https://default0123456789abcdef0123456789ab.cd.environment.api.powerplatform.com:443"
    "/powerautomate/automations/direct/workflows/0123456789abcdef0123456789abcdef/triggers/manual"
    f"/paths/invoke?api-version=1&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig={SIG}"
)
CONNECTOR_URL = (
    "https://contoso.webhook.office.com/webhookb2/11111111-2222-3333-4444-555555555555@"
    f"66666666-7777-8888-9999-000000000000/IncomingWebhook/{SIG}/aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
)


def config(
    tmp_path: Path,
    teams: dict[str, Any],
    http: dict[str, Any] | None = None,
    imds: str = "http://169.254.169.254",
) -> Any:
    """A config with [teams]; IMDS at `imds` (`check` asks it)."""
    return from_mapping(
        {
            "imds": {"vm_name": "vm0", "endpoint": imds},
            "store": {"url": f"sqlite:///{tmp_path / 's.db'}"},
            "http": http if http is not None else {"public_url": "https://vm1.example.net"},
            "teams": teams,
        },
        environ={},
    )


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        (LOGIC, WORKFLOWS),
        (POWER, WORKFLOWS),
        (CONNECTOR_URL, CONNECTOR),
        ("https://outlook.office.com/webhook/abc/IncomingWebhook/def", CONNECTOR),
        ("https://prod-27.westeurope.logic.azure.com/other/path", OTHER),
        ("https://example.com/workflows/x", OTHER),
        ("http://127.0.0.1:9/hook", OTHER),
    ],
)
def test_url_kinds(url: str, kind: str) -> None:
    assert url_kind(url) == kind


def test_a_workflows_url_enables_teams_with_adaptive_cards(tmp_path: Path) -> None:
    c = config(tmp_path, {"webhook_url": POWER})
    assert c.section("teams").format == "adaptive"
    assert not c.warnings
    assert SIG not in repr(c) and SIG not in str(c.redacted())


def test_messagecard_to_a_workflows_url_is_refused(tmp_path: Path) -> None:
    for url in (LOGIC, POWER):
        with pytest.raises(
            ConfigError, match=r"teams\.format: \"messagecard\" cannot go to a Workflows"
        ) as caught:
            config(tmp_path, {"webhook_url": url, "format": "messagecard"})
        assert SIG not in str(caught.value)


@pytest.mark.parametrize("fmt", ["adaptive", "messagecard"])
def test_a_connector_url_is_said_to_be_retired_with_what_to_do(tmp_path: Path, fmt: str) -> None:
    c = config(tmp_path, {"webhook_url": CONNECTOR_URL, "format": fmt})
    (warning,) = c.warnings
    assert warning.startswith("teams.webhook_url is an Office 365 connector URL (retired")
    assert "deliveries to it fail" in warning
    assert "Post to a channel when a webhook request is received" in warning
    assert SIG not in warning


def test_a_logic_apps_workflows_url_is_said_to_have_stopped(tmp_path: Path) -> None:
    c = config(tmp_path, {"webhook_url": LOGIC})
    (warning,) = c.warnings
    assert "*.logic.azure.com, which Microsoft stopped on 2025-11-30" in warning
    assert "*.environment.api.powerplatform.com" in warning
    assert SIG not in warning
    assert not config(tmp_path, {"webhook_url": POWER}).warnings


@pytest.mark.parametrize(
    ("url", "says"),
    [
        (CONNECTOR_URL, "is an Office 365 connector URL (retired by Microsoft in 2026)"),
        (LOGIC, "which Microsoft stopped on 2025-11-30"),
    ],
)
def test_check_prints_a_dead_url_and_run_logs_it_once_at_start(
    tmp_path: Path, sim: Simulator, url: str, says: str, caplog: pytest.LogCaptureFixture
) -> None:
    c = config(tmp_path, {"webhook_url": url}, imds=sim.url)
    out = io.StringIO()
    commands.check(c, as_json=False, out=out)
    lines = [line for line in out.getvalue().splitlines() if says in line]
    assert len(lines) == 1 and lines[0].startswith("warning: teams.webhook_url ")
    assert SIG not in out.getvalue()
    caplog.set_level("WARNING", logger="sebridge.config")
    commands._say_warnings(c)  # what run says once, before it starts its parts
    assert [r.getMessage() for r in caplog.records if says in r.getMessage()] == [lines[0][9:]]


@pytest.mark.parametrize(
    ("teams", "says"),
    [
        (
            {"webhook_url": LOGIC.replace("https://", "http://")},
            "teams.webhook_url: must be an https:// URL",
        ),
        (
            {"webhook_url": "prod-27.westeurope.logic.azure.com/workflows"},
            "teams.webhook_url: must be an http:// or https:// URL",
        ),
        (
            {"webhook_url": LOGIC, "format": "card"},
            'teams.format: must be one of adaptive, messagecard; got "card"',
        ),
        ({"webhook_url": LOGIC, "webhok": 1}, 'unknown key "webhok" in [teams]'),
    ],
)
def test_bad_teams_settings(tmp_path: Path, teams: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config(tmp_path, teams)
    assert says in str(caught.value)
    assert SIG not in str(caught.value)


def test_webhook_url_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "teams-url"
    path.write_text(LOGIC + "\n")
    c = config(tmp_path, {"webhook_url_file": str(path)})
    assert c.section("teams").webhook_url.reveal() == LOGIC


def test_a_channel_link_is_refused_naming_the_key_that_gave_it(tmp_path: Path) -> None:
    link = "https://teams.microsoft.com/l/channel/19%3aabc%40thread.tacv2/ops?groupId=1&tenantId=2"
    path = tmp_path / "teams-url"
    path.write_text(link + "\n")
    for teams, key in (
        ({"webhook_url_file": str(path)}, "teams.webhook_url_file"),
        ({"webhook_url": link}, "teams.webhook_url"),
    ):
        with pytest.raises(ConfigError) as caught:
            config(tmp_path, teams)
        assert f"{key}: is a link to a Teams page" in str(caught.value)


def test_without_public_url_cards_have_no_button_and_we_say_so(
    tmp_path: Path, sim: Simulator
) -> None:
    # Valid: Teams then alerts without approval (tests/test_cli_deployed.py says it once).
    c = config(tmp_path, {"webhook_url": POWER}, http={}, imds=sim.url)
    assert not c.warnings
    out = io.StringIO()
    assert commands.check(c, as_json=False, out=out) == 0
    assert "ok: teams: approval links are off (http.public_url is not set)" in out.getvalue()


def test_check_names_the_kind_never_the_url(tmp_path: Path, sim: Simulator) -> None:
    for url, kind in (
        (POWER, "a Workflows (Power Automate) webhook URL"),
        (CONNECTOR_URL, "an Office 365 connector URL"),
    ):
        c = config(tmp_path, {"webhook_url": url}, imds=sim.url)
        for as_json in (False, True):
            out = io.StringIO()
            assert commands.check(c, as_json=as_json, out=out) == 0
            assert SIG not in out.getvalue()
        out = io.StringIO()
        commands.check(c, as_json=False, out=out)
        assert f"ok: teams: webhook_url is {kind}; format adaptive" in out.getvalue()
        assert "nothing is posted to test it" in out.getvalue()
        assert "sinks: console, teams" in out.getvalue()


def test_sebridge_check_refuses_a_messagecard_to_workflows(tmp_path: Path) -> None:
    from helpers import cli_env, run_cli, toml_str

    store = toml_str(f"sqlite:///{tmp_path / 's.db'}")
    path = tmp_path / "sebridge.toml"
    path.write_text(
        f"[store]\nurl = {store}\n"
        '[teams]\nwebhook_url = "${TEAMS_WEBHOOK_URL}"\nformat = "messagecard"\n',
        encoding="utf-8",
    )
    done = run_cli("check", "--config", str(path), env=cli_env(TEAMS_WEBHOOK_URL=POWER))
    assert done.returncode != 0
    assert '"messagecard" cannot go to a Workflows webhook URL' in done.stderr + done.stdout
    assert SIG not in done.stderr + done.stdout
