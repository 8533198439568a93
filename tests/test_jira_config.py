"""[jira] configuration: what is accepted, what is refused, and that no secret is quoted back."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from sebridge.config.loader import Config
from sebridge.integrations.jira import JiraSettings
from sebridge.integrations.registry import config_from_mapping as from_mapping
from sebridge.integrations.registry import enabled as enabled_integrations
from sebridge.integrations.registry import load_config
from sebridge.kernel.errors import ConfigError

SEKRIT = "SEKRIT-7f3a9c"
CLOUD = {"url": "https://x.atlassian.net", "project": "OPS", "email": "a@b.c", "api_token": "t"}
DC = {"url": "https://jira.example.net/jira", "project": "OPS", "pat": "p"}


pytestmark = pytest.mark.usefixtures("no_config")


def build(jira: dict[str, Any], env: dict[str, str] | None = None) -> Config:
    return from_mapping({"jira": jira}, environ=env or {})


def error_of(jira: dict[str, Any], env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        build(jira, env)
    return str(info.value)


def test_defaults_and_off_without_url() -> None:
    cfg = from_mapping({}, environ={})
    jira: JiraSettings = cfg.section("jira")
    assert (jira.issue_type, jira.done_transition, jira.approve_status, jira.poll_interval) == (
        "Task",
        "Done",
        "",
        10.0,
    )
    assert "jira" not in [i.name for i in enabled_integrations(cfg)]


@pytest.mark.parametrize(("section", "cloud"), [(CLOUD, True), (DC, False)])
def test_cloud_and_data_center_are_accepted(section: dict[str, Any], cloud: bool) -> None:
    cfg = build({**section, "url": section["url"] + "/", "approve_status": " Approved "})
    jira: JiraSettings = cfg.section("jira")
    assert jira.cloud is cloud
    assert jira.url == section["url"]  # normalised without the trailing slash
    assert jira.approve_status == "Approved"
    assert "jira" in [i.name for i in enabled_integrations(cfg)]


def test_secrets_from_files_and_variables(tmp_path: Path) -> None:
    path = tmp_path / "pat"
    path.write_text("pat-" + SEKRIT + "\n", encoding="utf-8")
    cfg = build({"url": "https://j", "project": "P", "pat_file": str(path)})
    assert cfg.section("jira").pat.reveal() == "pat-" + SEKRIT
    cfg = build({**CLOUD, "api_token": "${JIRA_API_TOKEN}"}, {"JIRA_API_TOKEN": SEKRIT})
    assert cfg.section("jira").api_token.reveal() == SEKRIT
    assert SEKRIT not in repr(cfg) and SEKRIT not in str(cfg.redacted())


@pytest.mark.parametrize(
    ("jira", "expected"),
    [
        ({**CLOUD, "url": "example.atlassian.net"}, "jira.url: must be an http:// or https:// URL"),
        ({**CLOUD, "url": "ftp://x"}, "jira.url: must be an http:// or https:// URL"),
        ({**CLOUD, "url": "https://x/?a=b"}, "jira.url: must not have a query string"),
        ({**CLOUD, "project": ""}, "jira.project is empty; it is required when Jira is enabled"),
        ({**CLOUD, "issue_type": " "}, "jira.issue_type is empty"),
        ({**CLOUD, "done_transition": ""}, "jira.done_transition is empty"),
        (
            {**CLOUD, "email": "", "api_token": ""},
            "jira: set email and api_token (Jira Cloud) or pat (Data Center)",
        ),
        ({**CLOUD, "api_token": ""}, "jira.api_token is empty; it is required with jira.email"),
        ({**CLOUD, "email": ""}, "jira.email is empty; it is required with jira.api_token"),
        (
            {**CLOUD, "pat": "p"},
            "set email and api_token (Jira Cloud) or pat (Data Center), not both",
        ),
        ({"api_token": "t"}, "jira.url is empty; it is required when jira.api_token is set"),
        ({"pat": "p"}, "jira.url is empty; it is required when jira.pat is set"),
        ({**CLOUD, "poll_interval": 0}, "jira.poll_interval: must be >= 0.2"),
        ({**CLOUD, "colour": "red"}, 'unknown key "colour" in [jira]'),
    ],
)
def test_bad_settings_name_the_key(jira: dict[str, Any], expected: str) -> None:
    assert expected in error_of(jira)


def test_unset_variable_in_a_secret_is_an_error() -> None:
    message = error_of({**DC, "pat": "${JIRA_PAT}"})
    assert "JIRA_PAT" in message and "not set" in message


@pytest.mark.parametrize(
    "jira",
    [
        {**CLOUD, "url": f"https://u:{SEKRIT}@x.atlassian.net"},
        {**CLOUD, "url": f"https://x.atlassian.net/?token={SEKRIT}"},
        {**CLOUD, "api_token": SEKRIT, "pat": SEKRIT},
        {**CLOUD, "email": "", "api_token": SEKRIT},
    ],
)
def test_no_secret_is_quoted_back(jira: dict[str, Any]) -> None:
    assert SEKRIT not in error_of(jira)


def test_email_with_pat_is_a_warning() -> None:
    cfg = build({**DC, "email": "a@b.c"})
    assert any("jira.email is not used with jira.pat" in w for w in cfg.warnings)


def test_example_jira_section_loads_uncommented(tmp_path: Path) -> None:
    """docs/channels/jira.md's Cloud setup: uncomment url, email and api_token in config/example.toml."""
    example = Path(__file__).parent.parent / "config" / "example.toml"
    text = re.sub(r"(?m)^# ((url|email|api_token) = )", r"\1", example.read_text("utf-8"))
    path = tmp_path / "jira.toml"
    path.write_text(text, encoding="utf-8")
    cfg = load_config(path, environ={"JIRA_API_TOKEN": SEKRIT})
    assert "jira" in [i.name for i in enabled_integrations(cfg)]
    jira: JiraSettings = cfg.section("jira")
    assert (jira.url, jira.project, jira.cloud) == ("https://example.atlassian.net", "OPS", True)
    with pytest.raises(ConfigError) as info:  # the variable unset: an error, not "off"
        load_config(path, environ={})
    assert "JIRA_API_TOKEN" in str(info.value)
