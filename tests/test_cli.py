"""The `sebridge` command-line contract (docs/cli.md, docs/ARCHITECTURE.md "Interfaces").

Most commands run in this process through `sebridge.cli.main([...])` with
stdout/stderr redirected (fast); the ones where the process itself is the
contract (help, exit status of `python -m sebridge`, $SEBRIDGE_CONFIG, the
defaults, the console line on stdout, a dead IMDS) run as real processes. The
IMDS simulator runs in this process, over a real socket. Exit codes: 0 done,
1 run-time failure (IMDS, store), 2 bad usage or configuration, 3 approval refused.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from helpers import cli_env, cli_main, query, run_cli, write_config
from pages import page
from sebridge import __version__
from sebridge.cli.main import main
from sebridge.imds.simulator import Simulator

COMMANDS = (
    "run",
    "once",
    "events",
    "approve",
    "history",
    "check",
    "policy",
    "calendar-url",
    "simulate",
    "demo",
)
WITH_CONFIG = ("run", "once", "events", "approve", "history", "check", "calendar-url")
WITH_JSON = ("once", "events", "approve", "history", "check")
# Where a real process looks when neither --config nor $SEBRIDGE_CONFIG is given
# (read before the in-process fixture, conftest's cli_in_process, points it elsewhere).
EVENT_FIELDS = {"event_id", "event_type", "state", "policy", "approval", "deliveries"}
pytestmark = pytest.mark.usefixtures("cli_in_process")
run = cli_main


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state.db"


@pytest.fixture
def cfg(tmp_path: Path, sim: Simulator, db: Path) -> str:
    """Console on (the default sink), no JSON lines, store in tmp_path."""
    return str(write_config(tmp_path / "sebridge.toml", endpoint=sim.url, db=db, console=True))


def run_process(*argv: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """`python -m sebridge ARGV` as a real process -> (exit code, stdout, stderr)."""
    result = run_cli(*argv, env=env)
    return result.returncode, result.stdout, result.stderr


def as_json(text: str) -> Any:
    return json.loads(text)


# --- help and usage --------------------------------------------------------------------------


def test_help_lists_every_command() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    assert result.stdout.startswith("usage: sebridge")
    for command in COMMANDS:  # a long name has its help on the next line
        assert re.search(rf"^    {command}\s", result.stdout, re.M), command


def test_the_cli_page_has_a_row_for_every_command_and_no_other() -> None:
    """docs/cli.md's table is what `sebridge --help` lists, subcommands spelt out."""
    listed = re.findall(r"^    ([\w-]+)(?:  |\n)", run_cli("--help").stdout, re.M)
    rows = re.findall(r"^\| `sebridge ([\w-]+)[^`]*` \|", page("cli.md"), re.M)
    assert sorted(rows) == sorted(listed)
    assert {"hooks", *COMMANDS} == set(listed)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"sebridge {__version__}"


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: sebridge {command}")
    assert ("--config" in out) == (command in WITH_CONFIG)
    assert ("--json" in out) == (command in WITH_JSON)
    if command == "approve":
        assert "EVENT_ID" in out
        assert "--as" in out


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "usage: sebridge" in err
    # The real process agrees.
    code, out, err = run_process()
    assert code == 2
    assert out == ""
    assert "usage: sebridge" in err


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["frobnicate"])
    assert exit_info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


# --- check -------------------------------------------------------------------------------------


def test_check_valid_file(cfg: str, db: Path) -> None:
    code, out, err = run("check", "--config", cfg)
    assert code == 0, err
    assert f"configuration: {cfg}: valid" in out
    assert "sinks: console" in out
    # A store that is not there yet is said, never created: the daemon creates it.
    assert not db.exists()
    assert f"ok: store: {db} does not exist yet" in out


def test_check_json(cfg: str, sim: Simulator) -> None:
    code, out, _ = run("check", "--json", "--config", cfg)
    assert code == 0
    report = as_json(out)
    assert set(report) == {"config", "source", "warnings", "ok", "problems"}
    assert report["source"] == cfg
    assert report["problems"] == []
    assert report["config"]["imds"]["endpoint"] == sim.url
    assert report["config"]["imds"]["poll_interval"] == 0.2
    assert report["config"]["console"]["enabled"] is True


def test_check_unknown_key_names_it(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[imds]\npoll_intervall = 1.0\n", encoding="utf-8")
    code, out, err = run("check", "--config", str(bad))
    assert code == 2
    assert out == ""
    assert "configuration error" in err
    assert "poll_intervall" in err
    assert "poll_interval" in err.replace("poll_intervall", "")  # the suggestion


def test_check_toml_syntax_error(tmp_path: Path) -> None:
    bad = tmp_path / "broken.toml"
    bad.write_text("[imds\nendpoint = 'http://x'\n", encoding="utf-8")
    code, _, err = run_process("check", "--config", str(bad))
    assert code == 2
    assert "invalid TOML" in err
    assert str(bad) in err
    assert "Traceback" not in err


def test_check_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    code, _, err = run("check", "--config", str(missing))
    assert code == 2
    assert str(missing) in err
    assert "does not exist" in err


@pytest.mark.slow
def test_sebridge_config_variable_is_honoured(cfg: str, tmp_path: Path, sim: Simulator) -> None:
    code, out, err = run_process("check", env=cli_env(SEBRIDGE_CONFIG=cfg))
    assert code == 0, err
    assert f"configuration: {cfg}: valid" in out
    code, out, _ = run_process("check", "--json", env=cli_env(SEBRIDGE_CONFIG=cfg))
    assert code == 0
    assert as_json(out)["source"] == cfg

    # --config wins over the variable.
    other = write_config(
        tmp_path / "other.toml", endpoint=sim.url, db=tmp_path / "o.db", vm_name="vm0"
    )
    code, out, _ = run_process(
        "check", "--json", "--config", str(other), env=cli_env(SEBRIDGE_CONFIG=cfg)
    )
    assert code == 0
    assert as_json(out)["source"] == str(other)

    # A variable naming a missing file is an error that says where the name came from.
    missing = str(tmp_path / "missing.toml")
    code, _, err = run_process("check", env=cli_env(SEBRIDGE_CONFIG=missing))
    assert code == 2
    assert missing in err
    assert "$SEBRIDGE_CONFIG" in err


SLACK_SECRETS = """
[slack]
bot_token = "xoxb-SECRET-123"
app_token = "xapp-SECRET-456"
channel = "C0123456789"
approvers = ["U0123ABCD"]
api_url = "http://127.0.0.1:9/api/"
"""


@pytest.mark.slow
def test_check_never_shows_secrets(tmp_path: Path) -> None:
    token_file = tmp_path / "signing"
    token_file.write_text("SECRET-signing-789\n", encoding="utf-8")
    path = write_config(
        tmp_path / "secrets.toml",
        endpoint="http://127.0.0.1:9",
        db=tmp_path / "state.db",
        extra=SLACK_SECRETS + f'signing_secret_file = "{token_file}"\n',
    )
    outputs = []
    for argv in (
        ["check", "--config", str(path)],
        ["check", "--json", "--config", str(path)],
        ["check", "-v", "--config", str(path)],
    ):
        code, out, err = run(*argv)
        assert code == 1, err  # valid, but nothing answers at Slack's api_url
        outputs.append((out, err))
    assert "sinks: slack" in outputs[0][0]  # write_config turns the console off
    assert "problem: slack.api_url: cannot reach Slack" in outputs[0][0]
    report = as_json(outputs[1][0])
    assert report["config"]["slack"]["bot_token"] == "***"
    assert report["config"]["slack"]["app_token"] == "***"
    assert report["config"]["slack"]["signing_secret"] == "***"
    assert report["config"]["slack"]["channel"] == "C0123456789"
    for out, err in outputs:
        assert "SECRET" not in out
        assert "SECRET" not in err


@pytest.mark.slow
def test_check_says_an_unreachable_slack_once(tmp_path: Path) -> None:
    """As a process, with sebridge's logging set up: slack_sdk's own ERROR line about the
    failed request said the problem a second time, on stderr."""
    path = write_config(
        tmp_path / "slack.toml",
        endpoint="http://127.0.0.1:9",
        db=tmp_path / "state.db",
        extra=SLACK_SECRETS,
    )
    code, out, err = run_process("check", "--config", str(path))
    assert code == 1, err
    assert out.count("cannot reach Slack") == 1
    assert "problem: slack.api_url: cannot reach Slack" in out
    assert "Connection refused" not in err and "slack_sdk" not in err, err
    assert err == ""


def test_bad_secret_is_reported_without_its_value(tmp_path: Path) -> None:
    path = write_config(
        tmp_path / "secrets.toml",
        endpoint="http://127.0.0.1:9",
        db=tmp_path / "state.db",
        extra=SLACK_SECRETS.replace("xoxb-SECRET-123", "xoxp-SECRET-123"),
    )
    code, out, err = run("check", "--config", str(path))
    assert code == 2
    assert "slack.bot_token" in err
    assert "SECRET" not in out + err


@pytest.mark.slow
def test_check_never_shows_the_store_password(tmp_path: Path) -> None:
    path = tmp_path / "pg.toml"
    path.write_text(
        '[store]\nurl = "postgresql://sebridge:SECRET-789@db.example.net/sebridge"\n',
        encoding="utf-8",
    )
    texts = []
    for argv in (["check", "--config", str(path)], ["check", "--json", "--config", str(path)]):
        _, out, err = run(*argv)
        texts.append(out + err)
    assert "postgresql://sebridge:***@db.example.net/sebridge" in texts[1]  # redacted config
    for text in texts:
        assert "SECRET" not in text


# --- once --------------------------------------------------------------------------------------


def test_once_prints_the_console_line(cfg: str, sim: Simulator, db: Path) -> None:
    event_id = sim.schedule("Reboot")
    code, out, err = run_process("once", "--config", cfg)
    assert code == 0, err
    lines = [line for line in out.splitlines() if event_id in line]
    assert len(lines) == 1, out
    assert "SCHEDULED" in lines[0]
    assert "Reboot" in lines[0]
    assert "policy=ask" in lines[0]
    assert "vm0 (this VM)" in lines[0]
    assert query(db, "SELECT event_id, kind FROM transitions") == [(event_id, "scheduled")]

    # Nothing changed: a second tick says nothing and records nothing.
    code, out, _ = run("once", "--config", cfg)
    assert code == 0
    assert event_id not in out
    assert len(query(db, "SELECT id FROM transitions")) == 1


def test_once_json(cfg: str, sim: Simulator) -> None:
    event_id = sim.schedule("Reboot", source="User")
    code, out, err = run("once", "--json", "--config", cfg)
    assert code == 0, err
    report = as_json(out)  # stdout is only JSON: the console line went to stderr
    assert report["polled"] is True
    assert report["error"] is None
    assert report["transitions"] == [
        {"kind": "scheduled", "event_id": event_id, "event_type": "Reboot"}
    ]
    assert report["approvals_done"] == 1  # a user event: approved by the policy
    assert sim.start_requests == [event_id]
    assert event_id in err


def test_once_against_a_dead_endpoint(
    cfg: str, sim: Simulator, tmp_path: Path, db: Path, refused_port: int
) -> None:
    dead = str(
        write_config(
            tmp_path / "dead.toml",
            endpoint=f"http://127.0.0.1:{refused_port}",
            db=db,
            console=True,
            vm_name="vm0",  # without it, `once` waits for IMDS to say it (test_vm_name.py)
        )
    )
    code, out, err = run_process("once", "--config", dead)
    assert code == 1
    assert out == ""
    assert "cannot reach IMDS" in err
    assert "Traceback" not in err
    assert query(db, "SELECT COUNT(*) FROM transitions") == [(0,)]
    assert query(db, "SELECT COUNT(*) FROM events") == [(0,)]

    # With an event known, a failed poll is never read as "all events gone".
    event_id = sim.schedule("Redeploy")
    assert run("once", "--config", cfg)[0] == 0
    code, out, _ = run("once", "--json", "--config", dead)
    assert code == 1
    report = as_json(out)
    assert report["polled"] is False
    assert "cannot reach IMDS" in report["error"]
    assert report["transitions"] == []
    assert query(db, "SELECT event_id, kind FROM transitions") == [(event_id, "scheduled")]
    assert query(db, "SELECT present, gone_at FROM events") == [(1, None)]


# --- events, history, approve ------------------------------------------------------------------


def test_events_table_and_json(cfg: str, sim: Simulator) -> None:
    code, out, _ = run("events", "--config", cfg)
    assert code == 0
    assert "no events" in out

    event_id = sim.schedule("Reboot")
    assert run("once", "--config", cfg)[0] == 0

    code, out, _ = run("events", "--config", cfg)
    assert code == 0
    head, *rows = out.splitlines()
    for column in ("EVENT ID", "TYPE", "STATE", "POLICY", "APPROVED BY", "DELIVERIES"):
        assert column in head
    assert len(rows) == 1
    assert rows[0].split()[:3] == [event_id, "Reboot", "scheduled"]
    assert "ask" in rows[0]
    assert "console:delivered" in rows[0]

    code, out, _ = run("events", "--json", "--config", cfg)
    assert code == 0
    (event,) = as_json(out)
    assert set(event) >= EVENT_FIELDS
    assert event["event_id"] == event_id
    assert event["event_type"] == "Reboot"
    assert event["state"] == "scheduled"
    assert event["policy"] == "ask"
    assert event["approval"] is None
    assert event["present"] is True
    assert event["deliveries"] == [
        {"sink": "console", "state": "delivered", "attempts": 1, "error": None}
    ]

    # Gone events leave the list, and come back with --all.
    sim.complete(event_id)
    assert run("once", "--config", cfg)[0] == 0
    assert as_json(run("events", "--json", "--config", cfg)[1]) == []
    (gone,) = as_json(run("events", "--all", "--json", "--config", cfg)[1])
    assert (gone["event_id"], gone["state"], gone["present"]) == (event_id, "cancelled", False)


def test_approve_exit_codes_and_json(cfg: str, sim: Simulator) -> None:
    event_id = sim.schedule("Reboot")
    running = sim.schedule("Freeze", duration=30)
    gone = sim.schedule("Redeploy")
    assert run("once", "--config", cfg)[0] == 0

    # People type GUIDs in lower case: the canonical id goes to IMDS.
    code, out, err = run("approve", event_id.lower(), "--as", "carol", "--config", cfg)
    assert code == 0, err
    assert f"approved {event_id} as carol" in out
    assert sim.start_requests == [event_id]

    sim.start_event(running)
    sim.complete(gone)
    code, out, _ = run("once", "--config", cfg)
    assert code == 0
    assert "STARTED" in out
    assert "CANCELLED" in out

    code, out, _ = run("approve", event_id, "--as", "dave", "--json", "--config", cfg)
    assert code == 3  # refused: already approved
    assert as_json(out) == {
        "event_id": event_id,
        "actor": "carol",
        "via": "cli",
        "state": "posted",
        "new": False,
        "error": None,
        "anyway_by": None,
    }
    code, out, _ = run("approve", event_id, "--config", cfg)
    assert code == 3
    assert "already approved by carol" in out

    code, out, err = run(
        "approve", "00000000-0000-4000-8000-000000000000", "--json", "--config", cfg
    )
    assert code == 3
    assert out == ""
    assert "approval refused" in err
    assert "unknown event" in err

    code, _, err = run("approve", running, "--config", cfg)
    assert code == 3
    assert "already started" in err

    code, _, err = run("approve", gone, "--config", cfg)
    assert code == 3
    assert "gone" in err

    assert sim.start_requests == [event_id]
    assert [p.ids for p in sim.posts] == [(event_id,)]  # nothing POSTed for refusals

    (record,) = [
        e for e in as_json(run("events", "--json", "--config", cfg)[1]) if e["event_id"] == event_id
    ]
    assert record["approval"] == {
        "actor": "carol",
        "via": "cli",
        "state": "posted",
        "error": None,
        "anyway": False,
        "asked_first_by": None,
    }


def test_approve_in_dry_run_posts_nothing(tmp_path: Path, sim: Simulator, db: Path) -> None:
    dry = str(
        write_config(tmp_path / "dry.toml", endpoint=sim.url, db=db, console=True, dry_run=True)
    )
    event_id = sim.schedule("Reboot")
    assert run("once", "--config", dry)[0] == 0
    code, out, err = run("approve", event_id, "--as", "erin", "--config", dry)
    assert code == 0, err
    assert out.startswith(f"would approve {event_id} as erin: dry run")
    assert sim.posts == []
    # The next tick's console line says the same, never APPROVED.
    code, out, _ = run("once", "--config", dry)
    assert f"WOULD APPROVE Reboot    {event_id} [DRY RUN] by erin via cli: dry run, nothing" in out
    assert "APPROVED" not in out


def test_history_text_and_json(cfg: str, sim: Simulator) -> None:
    code, out, _ = run("history", "--config", cfg)
    assert code == 0
    assert "no history yet" in out

    event_id = sim.schedule("Reboot")
    other = sim.schedule("Redeploy")
    assert run("once", "--config", cfg)[0] == 0
    assert run("approve", event_id, "--as", "carol", "--config", cfg)[0] == 0
    # The next tick delivers the approval the CLI recorded.
    code, out, _ = run("once", "--config", cfg)
    assert code == 0
    assert "APPROVED" in out
    assert "by carol via cli" in out

    code, out, _ = run("history", "--config", cfg)
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 3
    assert [line.split()[2] for line in lines] == ["scheduled", "scheduled", "approved"]
    assert "by carol via cli" in lines[2]
    assert all("[console:delivered]" in line for line in lines)

    code, out, _ = run("history", "--json", "--config", cfg)
    assert code == 0
    entries = as_json(out)
    assert [(e["kind"], e["event_id"]) for e in entries] == [
        ("scheduled", event_id),
        ("scheduled", other),
        ("approved", event_id),
    ]
    approved = entries[2]
    assert (approved["actor"], approved["via"], approved["dry_run"]) == ("carol", "cli", False)
    assert approved["deliveries"] == [
        {"sink": "console", "state": "delivered", "attempts": 1, "error": None}
    ]
    for entry in entries:
        assert {"id", "at", "kind", "event_id", "event_type", "deliveries"} <= set(entry)

    # One event only, matched case-insensitively.
    code, out, _ = run("history", event_id.lower(), "--json", "--config", cfg)
    assert code == 0
    assert [e["kind"] for e in as_json(out)] == ["scheduled", "approved"]


def test_main_writes_to_the_stdout_of_the_moment(cfg: str) -> None:
    # Regression: commands once bound `out=sys.stdout` at import, so a later
    # redirection (capsys, redirect_stdout) was ignored.
    importlib.import_module("sebridge.cli.commands")  # as in any process that imported it before
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(["check", "--config", cfg])
    assert code == 0
    assert f"configuration: {cfg}: valid" in buffer.getvalue()
