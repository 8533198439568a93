"""Config: discovery, interpolation, secrets, validation messages, the example file."""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sebridge.config import loader as config
from sebridge.config.loader import Config, Secret
from sebridge.config.secrets import Expander
from sebridge.integrations.registry import REGISTRY
from sebridge.integrations.registry import config_from_mapping as from_mapping
from sebridge.integrations.registry import enabled as enabled_integrations
from sebridge.integrations.registry import load_config as load
from sebridge.kernel.errors import ConfigError

EXAMPLE = Path(__file__).resolve().parent.parent / "config" / "example.toml"
SEKRIT = "SEKRIT-7f3a9c"  # recognisable: must never show up in a message or repr

BOT = "xoxb-1-" + SEKRIT
APP = "xapp-1-" + SEKRIT
SLACK_OK = {"bot_token": BOT, "app_token": APP, "channel": "C0123456789"}


pytestmark = pytest.mark.usefixtures("no_config")


def build(data: dict[str, Any], env: dict[str, str] | None = None) -> Config:
    return from_mapping(data, environ=env or {})


def error_of(data: dict[str, Any], env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        build(data, env)
    return str(info.value)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def lookup(cfg: Config, dotted: str) -> object:
    """A value by its dotted key; integration sections through Config.section()."""
    first, *rest = dotted.split(".")
    value: object = getattr(cfg, first) if hasattr(cfg, first) else cfg.section(first)
    for part in rest:
        value = getattr(value, part)
    return value


def sinks(cfg: Config) -> tuple[str, ...]:
    return tuple(i.name for i in enabled_integrations(cfg) if i.outbound)


# --- defaults ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("dotted", "expected"),
    [
        ("source", "defaults"),
        ("imds.endpoint", "http://169.254.169.254"),
        ("imds.api_version", "2020-07-01"),
        ("imds.poll_interval", 1.0),
        ("imds.timeout", 5.0),
        ("imds.vm_name", ""),
        ("store.url", "sqlite:////var/lib/sebridge/state.db"),
        ("store.retention_days", 90),
        ("store.backend", "sqlite"),
        ("store.sqlite_path", "/var/lib/sebridge/state.db"),
        ("policy.dry_run", False),
        ("policy.approve_user_events", True),
        ("policy.approve_freeze_under_seconds", 9),
        ("policy.only_this_vm", False),
        ("dispatch.retry_for_seconds_after_gone", 3600),
        ("dispatch.max_backoff_seconds", 300.0),
        ("dispatch.shutdown_grace_seconds", 5.0),
        ("http.listen", "127.0.0.1:8787"),
        ("http.listen_host", "127.0.0.1"),
        ("http.listen_port", 8787),
        ("console.enabled", True),
        ("jsonl.path", "-"),
        ("jsonl.enabled", True),  # the key; the sink is on only with a [jsonl] table
        ("slack.enabled", False),
        ("slack.socket_mode", False),
        ("slack.channel", ""),
        ("slack.approvers", ()),
        ("slack.api_url", "https://slack.com/api/"),
        ("slack.mention", ""),
        ("slack.mention_types", ("Preempt", "Terminate")),
        ("templates.dir", ""),
        ("log.level", "info"),
        ("log.format", "text"),
        ("warnings", ()),
    ],
)
def test_defaults(dotted: str, expected: object) -> None:
    value = lookup(load(environ={}), dotted)
    assert value == expected
    assert type(value) is type(expected)


def test_defaults_equal_the_class_defaults() -> None:
    loaded = load(environ={})
    # The core's sections from the classes; the integrations' from theirs (the registry's).
    assert replace(loaded, sections={}) == Config()
    assert loaded.sections == {i.name: i.settings() for i in REGISTRY if i.settings is not None}
    assert sinks(load(environ={})) == ("console",)


# --- discovery ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("explicit", "via_env", "default_exists", "winner"),
    [
        (True, True, True, "explicit"),
        (True, False, False, "explicit"),
        (False, True, True, "env"),
        (False, True, False, "env"),
        (False, False, True, "default"),
        (False, False, False, None),
    ],
)
def test_discovery_order(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    explicit: bool,
    via_env: bool,
    default_exists: bool,
    winner: str | None,
) -> None:
    files = {
        name: write(tmp_path / f"{name}.toml", f'[imds]\nvm_name = "{name}"\n')
        for name in ("explicit", "env", "default")
    }
    if default_exists:
        monkeypatch.setattr(config, "DEFAULT_PATH", str(files["default"]))
    env = {config.ENV_VAR: str(files["env"])} if via_env else {}
    cfg = load(files["explicit"] if explicit else None, environ=env)
    if winner is None:
        assert (cfg.source, cfg.imds.vm_name) == ("defaults", "")
    else:
        assert (cfg.source, cfg.imds.vm_name) == (str(files[winner]), winner)


def test_empty_env_var_counts_as_unset(tmp_path: Path) -> None:
    assert load(environ={config.ENV_VAR: ""}).source == "defaults"


@pytest.mark.parametrize(("use_env", "origin"), [(False, "--config"), (True, "$SEBRIDGE_CONFIG")])
def test_missing_named_file_is_an_error(tmp_path: Path, use_env: bool, origin: str) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError) as info:
        if use_env:
            load(environ={config.ENV_VAR: str(missing)})
        else:
            load(missing, environ={})
    assert str(missing) in str(info.value)
    assert origin in str(info.value)
    assert "does not exist" in str(info.value)


def test_unreadable_config_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file") as info:
        load(tmp_path, environ={})  # a directory
    assert str(tmp_path) in str(info.value)


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("[imds]\npoll_interval = \n", 2, 17),
        ('[imds]\nendpoint = "x"\n\n[slack\n', 4, 7),
        ('[imds]\nendpoint = "x"\nendpoint = "y"\n', 3, 15),
    ],
)
def test_toml_syntax_error_names_file_and_position(
    tmp_path: Path, text: str, line: int, column: int
) -> None:
    path = write(tmp_path / "bad.toml", text)
    with pytest.raises(ConfigError) as info:
        load(path, environ={})
    message = str(info.value)
    assert str(path) in message
    assert f"line {line}, column {column}" in message


def test_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'[imds]\nvm_name = "caf\xe9"\n')
    with pytest.raises(ConfigError, match="not UTF-8") as info:
        load(path, environ={})
    assert str(path) in str(info.value)


def test_source_of_from_mapping() -> None:
    assert from_mapping({}, environ={}).source == "<config>"
    assert from_mapping({}, environ={}, source="inline").source == "inline"
    with pytest.raises(ConfigError, match=r"^inline: imds\.timeout"):
        from_mapping({"imds": {"timeout": 0}}, environ={}, source="inline")


# --- interpolation -----------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "env", "expected"),
    [
        ("${NAME}", {"NAME": "vm1"}, "vm1"),
        ("${NAME}", {}, ""),
        ("pre-${NAME}-post", {"NAME": "vm1"}, "pre-vm1-post"),
        ("${A}${B}", {"A": "x", "B": "y"}, "xy"),
        ("$${NAME}", {"NAME": "vm1"}, "${NAME}"),
        ("a$$b", {}, "a$b"),
        ("$$$$", {}, "$$"),
        ("cost$5", {}, "cost$5"),
        ("trailing$", {}, "trailing$"),
        ("${NAME}", {"NAME": "${OTHER}"}, "${OTHER}"),  # no second round
        ("plain", {"plain": "x"}, "plain"),
    ],
)
def test_interpolation(raw: str, env: dict[str, str], expected: str) -> None:
    assert build({"imds": {"vm_name": raw}}, env).imds.vm_name == expected


def test_interpolation_in_lists_and_secrets() -> None:
    env = {"U": "U0123ABCD", "TOKEN": BOT, "SIGN": "s3"}
    cfg = build(
        {
            "slack": {
                "bot_token": "${TOKEN}",
                "signing_secret": "${SIGN}",
                "channel": "C1",
                "approvers": ["${U}", "S0456EFGH"],
            }
        },
        env,
    )
    assert cfg.section("slack").approvers == ("U0123ABCD", "S0456EFGH")
    assert cfg.section("slack").bot_token.reveal() == BOT
    assert cfg.section("slack").enabled and not cfg.section("slack").socket_mode


def test_environment_is_read_once() -> None:
    env = {"NAME": "vm1"}
    cfg = build({"imds": {"vm_name": "${NAME}"}}, env)
    env["NAME"] = "vm2"
    assert cfg.imds.vm_name == "vm1"


@pytest.mark.parametrize("raw", ["${}", "${1ABC}", "${A-B}", "${UNCLOSED", "x${A:-default}"])
def test_bad_variable_reference_names_the_key(raw: str) -> None:
    message = error_of({"slack": {"channel": raw}})
    assert "slack.channel: bad variable reference" in message


def test_unset_variable_explains_a_required_value() -> None:
    data = {"slack": {"bot_token": BOT, "app_token": APP, "channel": "${SLACK_CHANNEL}"}}
    message = error_of(data)
    assert "slack.channel is empty (environment variable SLACK_CHANNEL is not set)" in message
    message = error_of(data, {"SLACK_CHANNEL": ""})
    assert "environment variable SLACK_CHANNEL is empty" in message


@pytest.mark.parametrize(("env", "state"), [({}, "not set"), ({"SLACK_BOT_TOKEN": ""}, "empty")])
def test_a_secret_naming_an_unset_variable_is_an_error(env: dict[str, str], state: str) -> None:
    # An unset ${SLACK_BOT_TOKEN} once turned Slack off in silence (e.g. under systemd).
    message = error_of({"slack": {**SLACK_OK, "bot_token": "${SLACK_BOT_TOKEN}"}}, env)
    assert f"slack.bot_token: environment variable SLACK_BOT_TOKEN is {state}" in message
    message = error_of({"slack": {**SLACK_OK, "bot_token_file": "${DIR}/token"}}, env)
    assert "slack.bot_token_file: environment variable DIR is not set" in message


@pytest.mark.parametrize(("env", "state"), [({}, "not set"), ({"PG_PASSWORD": ""}, "empty")])
def test_a_store_url_naming_an_unset_variable_is_an_error(env: dict[str, str], state: str) -> None:
    # It once loaded as postgresql://sebridge:@db/sebridge: a login with no password.
    url = "postgresql://sebridge:${PG_PASSWORD}@db.example.net/sebridge"
    message = error_of({"store": {"url": url}}, env)
    assert f"store.url: environment variable PG_PASSWORD is {state}" in message
    assert message.count("store.url") == 1
    given = build({"store": {"url": url}}, {"PG_PASSWORD": SEKRIT})
    assert given.store.url == f"postgresql://sebridge:{SEKRIT}@db.example.net/sebridge"


@given(st.text().filter(lambda s: "$" not in s))
def test_text_without_dollar_is_unchanged(text: str) -> None:
    assert Expander({}).expand(text, "k") == text


# --- secrets -----------------------------------------------------------------


def test_secret_behaviour() -> None:
    s = Secret(SEKRIT)
    assert (str(s), repr(s), f"{s}", bool(s)) == ("***", "Secret('***')", "***", True)
    assert (str(Secret()), repr(Secret()), bool(Secret())) == ("", "Secret('')", False)
    assert s.reveal() == SEKRIT
    assert s == Secret(SEKRIT) and s != Secret("other") and s != SEKRIT
    assert hash(s) == hash(Secret(SEKRIT))


@pytest.mark.parametrize(
    ("content", "expected"),
    [(BOT + "\n", BOT), (BOT + "\r\n", BOT), (BOT, BOT), (BOT + "\n\n", BOT)],
)
def test_secret_from_file(tmp_path: Path, content: str, expected: str) -> None:
    path = write(tmp_path / "token", content)
    cfg = build({"slack": {**SLACK_OK, "bot_token": "", "bot_token_file": str(path)}})
    assert cfg.section("slack").bot_token.reveal() == expected


def test_secret_file_path_may_be_interpolated(tmp_path: Path) -> None:
    write(tmp_path / "token", BOT + "\n")
    cfg = build(
        {"slack": {**SLACK_OK, "bot_token": "", "bot_token_file": "${DIR}/token"}},
        {"DIR": str(tmp_path)},
    )
    assert cfg.section("slack").bot_token.reveal() == BOT


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ("slack", "bot_token"),
        ("slack", "app_token"),
        ("slack", "signing_secret"),
    ],
)
def test_secret_set_twice_is_an_error(tmp_path: Path, section: str, key: str) -> None:
    path = write(tmp_path / "s", SEKRIT)
    message = error_of({section: {key: SEKRIT, f"{key}_file": str(path)}})
    assert f"{section}: set {key} or {key}_file, not both" in message
    assert SEKRIT not in message


def test_empty_inline_value_does_not_conflict_with_file(tmp_path: Path) -> None:
    path = write(tmp_path / "s", "xoxb-from-file")
    cfg = build(
        {"slack": {**SLACK_OK, "bot_token": "", "bot_token_file": str(path)}},
    )
    assert cfg.section("slack").bot_token.reveal() == "xoxb-from-file"


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        (
            "missing",
            None,
            'slack.signing_secret_file: cannot read "{path}": No such file or directory',
        ),
        ("", None, 'slack.signing_secret_file: cannot read "{path}": Is a directory'),
        ("empty", b"\n", 'slack.signing_secret_file: "{path}" is empty'),
        (
            "binary",
            b"\xff" + SEKRIT.encode(),
            'slack.signing_secret_file: "{path}" is not UTF-8 text',
        ),
    ],
)
def test_unreadable_secret_file(
    tmp_path: Path, name: str, content: bytes | None, expected: str
) -> None:
    path = tmp_path / name if name else tmp_path
    if content is not None:
        path.write_bytes(content)
    message = error_of({"slack": {"signing_secret_file": str(path)}})
    assert expected.format(path=path) in message
    assert SEKRIT not in message


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_secret_file_without_permission(tmp_path: Path) -> None:
    path = write(tmp_path / "s", SEKRIT)
    path.chmod(0)
    message = error_of({"slack": {"signing_secret_file": str(path)}})
    assert f'slack.signing_secret_file: cannot read "{path}": Permission denied' in message


# Each of these fails validation with a recognisable secret somewhere in it.
LEAKY = [
    {"slack": {"bot_token": "xoxp-" + SEKRIT, "channel": "C1", "app_token": APP}},
    {"slack": {"bot_token": BOT, "app_token": "xoxb-" + SEKRIT, "channel": "C1"}},
    {"slack": {"bot_token": SEKRIT}},
    {"slack": {"bot_token": BOT, "app_token": APP}},
    {"slack": {"bot_token": "${" + SEKRIT + " x}"}},
    {"slack": {"signing_secret": SEKRIT}},
    {"slack": {"bot_token": 7312, "signing_secret": [SEKRIT]}},
    {"http": {"listen": "nope"}, "slack": {"signing_secret": SEKRIT}},
    {"slack": {**SLACK_OK, "bot_token": "${UNSET}", "signing_secret": SEKRIT}},
    {"store": {"url": f"mysql://u:{SEKRIT}@h/db"}},
    {"store": {"url": f"postgresql://u:{SEKRIT}@h/db"}, "imds": {"timeout": -1}},
]


@pytest.mark.parametrize("data", LEAKY)
def test_secrets_never_appear_in_errors(data: dict[str, Any]) -> None:
    message = error_of(data)
    assert SEKRIT not in message
    assert "7312" not in message


def test_secrets_never_appear_in_repr_str_or_redacted(tmp_path: Path) -> None:
    path = write(tmp_path / "pat", "pat-" + SEKRIT)
    cfg = build(
        {
            "store": {"url": f"postgresql://u:{SEKRIT}@db/sebridge?password={SEKRIT}"},
            "slack": {**SLACK_OK, "signing_secret": "", "signing_secret_file": str(path)},
        }
    )
    assert sinks(cfg) == ("console", "slack")
    for text in (repr(cfg), str(cfg), str(cfg.redacted()), repr(cfg.store), str(cfg.warnings)):
        assert SEKRIT not in text
    redacted = cfg.redacted()
    assert redacted["slack"]["bot_token"] == "***"
    assert redacted["slack"]["signing_secret"] == "***"
    assert redacted["store"]["url"] == "postgresql://u:***@db/sebridge?***"
    assert cfg.section("slack").signing_secret.reveal() == "pat-" + SEKRIT
    assert cfg.store.url.endswith(SEKRIT)  # the real value is kept for the store


# --- validation --------------------------------------------------------------

# (data, the start of the problem: it names the key)
INVALID = [
    ({"imds": {"endpoint": "169.254.169.254"}}, "imds.endpoint: must be an http"),
    ({"imds": {"endpoint": "http://h/metadata"}}, "imds.endpoint: must be scheme://host"),
    ({"imds": {"endpoint": "http://h?x=1"}}, "imds.endpoint: must be scheme://host"),
    ({"imds": {"endpoint": "http://h:70000"}}, "imds.endpoint: is not a valid URL"),
    ({"imds": {"api_version": "2021-12-13"}}, "imds.api_version: must be one of"),
    ({"imds": {"poll_interval": "fast"}}, 'imds.poll_interval: "fast" is not a duration: give'),
    ({"imds": {"poll_interval": True}}, "imds.poll_interval: expected seconds (600) or a"),
    ({"imds": {"poll_interval": 0.1}}, "imds.poll_interval: must be >= 0.2"),
    ({"imds": {"poll_interval": 3601}}, "imds.poll_interval: must be <= 3600"),
    ({"imds": {"poll_interval": float("nan")}}, "imds.poll_interval: expected a finite"),
    ({"imds": {"timeout": 0}}, "imds.timeout: must be > 0"),
    ({"imds": {"vm_name": 3}}, "imds.vm_name: expected a string, got 3"),
    ({"store": {"url": "/var/lib/x.db"}}, "store.url: must be sqlite:"),
    ({"store": {"url": "sqlite:///"}}, "store.url: must be sqlite:"),
    ({"store": {"url": "sqlite:/x.db"}}, "store.url: must be sqlite:"),
    ({"store": {"url": "mysql://h/db"}}, "store.url: must be sqlite:"),
    ({"store": {"retention_days": 0}}, "store.retention_days: must be >= 1"),
    ({"store": {"retention_days": 1.5}}, "store.retention_days: expected an integer, got 1.5"),
    ({"policy": {"dry_run": "yes"}}, 'policy.dry_run: expected true or false, got "yes"'),
    ({"policy": {"dry_run": 0}}, "policy.dry_run: expected true or false, got 0"),
    ({"policy": {"approve_freeze_under_seconds": -1}}, "policy.approve_freeze_under_seconds"),
    ({"policy": {"only_this_vm": []}}, "policy.only_this_vm: expected true or false, got a list"),
    ({"dispatch": {"retry_for_seconds_after_gone": -5}}, "dispatch.retry_for_seconds_after_gone"),
    ({"dispatch": {"max_backoff_seconds": 0}}, "dispatch.max_backoff_seconds: must be > 0"),
    ({"dispatch": {"shutdown_grace_seconds": -0.5}}, "dispatch.shutdown_grace_seconds: must be >="),
    ({"http": {"listen": "8787"}}, "http.listen: must be host:port"),
    ({"http": {"listen": "::1:8787"}}, "http.listen: must be host:port"),
    ({"http": {"listen": "[nothost]:8787"}}, "http.listen: "),
    ({"http": {"listen": "h:65536"}}, "http.listen: port 65536 is out of range"),
    ({"console": {"enabled": "true"}}, "console.enabled: expected true or false"),
    ({"jsonl": {"path": ""}}, "jsonl.path is empty"),
    ({"jsonl": {"enabled": 1}}, "jsonl.enabled: expected true or false"),
    ({"slack": {**SLACK_OK, "channel": ""}}, "slack.channel is empty"),
    (
        {"slack": {**SLACK_OK, "app_token": ""}},
        "slack: set app_token (Socket Mode) or signing_secret",
    ),
    (
        {"slack": {**SLACK_OK, "bot_token": "xoxp-1"}},
        "slack.bot_token: expected a bot token (xoxb-...), got a user token",
    ),
    (
        {"slack": {**SLACK_OK, "bot_token": APP}},
        "slack.bot_token: expected a bot token (xoxb-...), got an app-level token",
    ),
    ({"slack": {**SLACK_OK, "bot_token": "xoxe.xoxb-1"}}, "got a rotating bot token"),
    (
        {"slack": {**SLACK_OK, "app_token": BOT}},
        "slack.app_token: expected an app-level token (xapp-...), got a bot token",
    ),
    ({"slack": {**SLACK_OK, "app_token": "nonsense"}}, "got a value that is not a Slack token"),
    (
        {"slack": {"signing_secret": "s"}},
        "slack.bot_token is empty; it is required when slack.signing_secret is set",
    ),
    (
        {"slack": {"approvers": ["U0123ABCD", "u0123abcd"]}},
        'slack.approvers[1]: "u0123abcd" is not a Slack user id',
    ),
    ({"slack": {"approvers": ["C0123ABCD"]}}, "slack.approvers[0]:"),
    ({"slack": {"approvers": ["U1"]}}, "slack.approvers[0]:"),
    ({"slack": {"approvers": "U0123ABCD"}}, "slack.approvers: expected a list of strings"),
    ({"slack": {"approvers": [1]}}, "slack.approvers: expected a list of strings"),
    ({"slack": {"api_url": "slack.com/api"}}, "slack.api_url: must be an http"),
    (
        {"slack": {"mention_types": ["Preemt"]}},
        'slack.mention_types: must be one of Freeze, Reboot, Redeploy, Preempt, Terminate; got "Preemt" (did you mean "Preempt"?)',
    ),
    ({"slack": {"bot_token": 5}}, "slack.bot_token: expected a string, got a number"),
    ({"slack": {"bot_token_file": 5}}, "slack.bot_token_file: expected a string, got 5"),
    ({"teams": {"webhook_url": "https://x/h", "format": "x"}}, "teams.format: must be one of"),
    ({"teams": {"webhook_url": "http://x/h"}}, "teams.webhook_url: must be an https:// URL"),
    ({"http": {"public_url": "https://vm1/?sig=x"}}, "http.public_url: must be the base URL"),
    (
        {"http": {"public_urls": "https://vm1"}},
        'unknown key "public_urls" in [http] (did you mean "public_url"?)',
    ),
    (
        {"templates": {"dir": "/nonexistent/templates"}},
        'templates.dir: "/nonexistent/templates" is not a directory',
    ),
    (
        {"log": {"level": "WARN"}},
        'log.level: must be one of debug, info, warning, error; got "WARN" (did you mean "warning"?)',
    ),
    ({"log": {"format": "yaml"}}, "log.format: must be one of text, json"),
    ({"imds": "fast"}, "[imds] must be a table, got str"),
]


@pytest.mark.parametrize(("data", "expected"), INVALID)
def test_validation_error_names_the_key(data: dict[str, Any], expected: str) -> None:
    message = error_of(data)
    assert message.startswith("<config>: ")
    assert expected in message


def test_all_problems_are_reported_together() -> None:
    message = error_of({"imds": {"poll_interval": "x", "timeout": "y"}, "log": {"level": "z"}})
    assert message.startswith("<config>: 3 problems:\n  - ")
    for key in ("imds.poll_interval", "imds.timeout", "log.level"):
        assert key in message


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {"imds": {"pol_interval": 1}},
            'unknown key "pol_interval" in [imds] (did you mean "poll_interval"?); known keys: endpoint, api_version, poll_interval, timeout, vm_name',
        ),
        (
            {"slack": {"bot_tokn": "x"}},
            'unknown key "bot_tokn" in [slack] (did you mean "bot_token"?)',
        ),
        (
            {"slack": {"bot_token_fil": "x"}},
            'unknown key "bot_token_fil" in [slack] (did you mean "bot_token_file"?)',
        ),
        ({"slack": {"enabled": True}}, 'unknown key "enabled" in [slack]'),
        ({"imds": {"zzzz": 1}}, 'unknown key "zzzz" in [imds]; known keys:'),
        (
            {"imsd": {}},
            "unknown section [imsd] (did you mean [imds]?); known sections: imds, store,",
        ),
        ({"Slack": {}}, "unknown section [Slack] (did you mean [slack]?)"),
        ({"notifiers": {}}, "unknown section [notifiers]; known sections:"),
        ({"poll_interval": 2}, 'unknown top-level key "poll_interval" (it belongs in [imds])'),
    ],
)
def test_unknown_names_are_errors_with_suggestions(data: dict[str, Any], expected: str) -> None:
    assert expected in error_of(data)


def test_secret_file_keys_are_known() -> None:
    message = error_of({"slack": {"nope": 1}})
    assert "bot_token_file" in message


# --- accepted values and normalisation ---------------------------------------


@pytest.mark.parametrize(
    ("url", "backend", "sqlite_path"),
    [
        ("sqlite:////var/lib/sebridge/state.db", "sqlite", "/var/lib/sebridge/state.db"),
        ("sqlite:///state.db", "sqlite", "state.db"),
        ("sqlite://", "sqlite", ":memory:"),
        ("sqlite:///:memory:", "sqlite", ":memory:"),
        ("postgresql://sebridge@db.example.net/sebridge", "postgresql", ""),
        ("postgres://u:p@db/x", "postgresql", ""),
        ("postgresql://", "postgresql", ""),
    ],
)
def test_store_urls(url: str, backend: str, sqlite_path: str) -> None:
    store = build({"store": {"url": url}}).store
    assert (store.url, store.backend, store.sqlite_path) == (url, backend, sqlite_path)


@pytest.mark.parametrize(
    ("listen", "host", "port"),
    [
        ("127.0.0.1:8787", "127.0.0.1", 8787),
        ("0.0.0.0:0", "0.0.0.0", 0),
        ("[::1]:8787", "::1", 8787),
        ("[::]:65535", "::", 65535),
        ("vm1.internal:80", "vm1.internal", 80),
    ],
)
def test_listen(listen: str, host: str, port: int) -> None:
    http = build({"http": {"listen": listen}}).http
    assert (http.listen, http.listen_host, http.listen_port) == (listen, host, port)


@pytest.mark.parametrize(
    ("data", "dotted", "expected"),
    [
        (
            {"imds": {"endpoint": "http://127.0.0.1:8080/"}},
            "imds.endpoint",
            "http://127.0.0.1:8080",
        ),
        ({"imds": {"endpoint": "https://imds"}}, "imds.endpoint", "https://imds"),
        (
            {"slack": {"api_url": "http://127.0.0.1:9/api"}},
            "slack.api_url",
            "http://127.0.0.1:9/api/",
        ),
        ({"slack": {"api_url": "https://x/api/"}}, "slack.api_url", "https://x/api/"),
        ({"imds": {"poll_interval": 2}}, "imds.poll_interval", 2.0),
        ({"imds": {"poll_interval": 0.2}}, "imds.poll_interval", 0.2),
        ({"dispatch": {"max_backoff_seconds": 60}}, "dispatch.max_backoff_seconds", 60.0),
        ({"policy": {"approve_freeze_under_seconds": 0}}, "policy.approve_freeze_under_seconds", 0),
        ({"imds": {"api_version": "2017-03-01"}}, "imds.api_version", "2017-03-01"),
        ({"slack": {"mention_types": []}}, "slack.mention_types", ()),
        ({"jsonl": {}}, "jsonl.enabled", True),
        ({"jsonl": {"enabled": False}}, "jsonl.enabled", False),
        ({"jsonl": {"path": "/var/log/sebridge.jsonl"}}, "jsonl.path", "/var/log/sebridge.jsonl"),
        ({"log": {"level": "debug", "format": "json"}}, "log.format", "json"),
    ],
)
def test_accepted_values(data: dict[str, Any], dotted: str, expected: object) -> None:
    value = lookup(build(data), dotted)
    assert value == expected
    assert type(value) is type(expected)


def test_templates_dir_that_exists(tmp_path: Path) -> None:
    assert build({"templates": {"dir": str(tmp_path)}}).templates.dir == str(tmp_path)


@pytest.mark.parametrize(
    ("data", "warning"),
    [
        (
            {"store": {"url": "sqlite:////mnt/sebridge/state.db"}},
            "store.url: the SQLite file is on the temporary disk",
        ),
        ({"store": {"url": "sqlite:///D:/sebridge/state.db"}}, "temporary disk"),
        ({"store": {"url": "sqlite:///d:\\sebridge\\state.db"}}, "temporary disk"),
        ({"slack": {**SLACK_OK}}, "slack.approvers is empty"),
    ],
)
def test_warnings(data: dict[str, Any], warning: str) -> None:
    warnings = build(data).warnings
    assert any(warning in w for w in warnings), warnings


@pytest.mark.parametrize(
    "url", ["sqlite:////var/lib/mnt/state.db", "sqlite:///mnt.db", "postgresql://h/mnt"]
)
def test_no_temp_disk_warning_elsewhere(url: str) -> None:
    assert build({"store": {"url": url}}).warnings == ()


# --- sinks -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({}, ("console",)),
        ({"console": {"enabled": False}}, ()),
        ({"jsonl": {}}, ("console", "jsonl")),
        ({"slack": {**SLACK_OK, "approvers": ["U0123ABCD"]}}, ("console", "slack")),
        ({"slack": {"channel": "C1", "approvers": ["U0123ABCD"]}}, ("console",)),
        (
            {
                "console": {"enabled": False},
                "jsonl": {"path": "/tmp/x.jsonl"},
                "slack": {**SLACK_OK, "app_token": "", "signing_secret": "s"},
            },
            ("jsonl", "slack"),
        ),
    ],
)
def test_sinks_enabled(data: dict[str, Any], expected: tuple[str, ...]) -> None:
    assert sinks(build(data)) == expected


def test_socket_mode_follows_app_token() -> None:
    assert build({"slack": SLACK_OK}).section("slack").socket_mode
    http_mode = build({"slack": {**SLACK_OK, "app_token": "", "signing_secret": "s"}})
    assert not http_mode.section("slack").socket_mode


# --- the example file --------------------------------------------------------


def test_example_loads_without_environment() -> None:
    cfg = load(EXAMPLE, environ={})
    assert cfg.source == str(EXAMPLE)
    assert sinks(cfg) == ("console",)
    assert cfg.warnings == ()
    defaults = from_mapping({}, environ={}).redacted()
    for name, section in cfg.redacted().items():
        for key, value in section.items():
            if (name, key) not in {
                ("slack", "channel"),
                ("slack", "approvers"),
                ("jira", "project"),
            }:
                assert value == defaults[name][key], (
                    f"{name}.{key} in example.toml is not the default"
                )


def test_example_loads_with_every_sink_configured(tmp_path: Path) -> None:
    # Uncomment every key of the commented-out [jsonl] and [slack] examples.
    text = EXAMPLE.read_text(encoding="utf-8")
    text = re.sub(
        r"(?m)^# (\[?(jsonl|path|enabled|bot_token|app_token|signing_secret)\b)", r"\1", text
    )
    env = {"SLACK_BOT_TOKEN": BOT, "SLACK_APP_TOKEN": APP, "SLACK_SIGNING_SECRET": SEKRIT}
    cfg = load(write(tmp_path / "all.toml", text), environ=env)
    assert sinks(cfg) == ("console", "jsonl", "slack")
    assert cfg.section("slack").socket_mode
    assert cfg.section("slack").approvers == ("U0123ABCD", "S0456EFGH")
    assert SEKRIT not in repr(cfg)


def test_example_documents_every_key() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    for name, section in Config().redacted().items():
        assert f"[{name}]" in text
        for key in section:
            assert f"\n{key} = " in text or f"\n# {key} = " in text, f"{name}.{key}"
