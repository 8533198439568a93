"""Every configuration problem at once (issue 24, item 4): `check` and `run` list them
all, one line each naming its key, whichever stage found them (a value that does not
read, a check of values, an integration's checks, a secret's file, a broken template);
a key whose value did not read is not judged a second time by its stand-in default."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from helpers import free_port, toml_str
from sebridge.cli.main import main

pytestmark = pytest.mark.usefixtures("hermetic")


def run(command: str, config: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        # `run` reads no environment file: systemd gives the service its environment.
        shell = ["--environment", "/dev/null"] if command != "run" else []
        code = main([command, "--config", str(config), *shell])
    return code, out.getvalue(), err.getvalue()


def listed(err: str) -> list[str]:
    """The problems of a `configuration error: N problems:` message, one a line."""
    return [line.removeprefix("  - ") for line in err.splitlines() if line.startswith("  - ")]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ["check", "run"])
def test_problems_in_three_sections_are_all_listed(tmp_path: Path, command: str) -> None:
    config = tmp_path / "sebridge.toml"
    config.write_text(
        '[imds]\npoll_interval = "soon"\n'  # does not read as a duration
        '[store]\nurl = "mysql://db/sebridge"\n'  # reads, fails its check
        f'[slack]\nbot_token = "xoxp-1-user"\nchannel = "C0123456789"\n'  # the integration's
        f"app_token_file = {toml_str(str(tmp_path / 'absent'))}\n"  # a secret's file
    )
    code, out, err = run(command, config)
    assert code == 2, out + err
    assert f"sebridge: configuration error: {config}: 4 problems:" in err
    problems = listed(err)
    assert [p.split(":")[0] for p in problems] == [
        "imds.poll_interval",
        "slack.app_token_file",
        "store.url",
        "slack.bot_token",
    ], err
    assert "store.url: must be sqlite:////absolute/path.db" in problems[2]
    assert "slack.bot_token: expected a bot token (xoxb-...), got a user token" in problems[3]
    assert "xoxp-1-user" not in err


def test_a_key_that_did_not_read_is_not_judged_again(tmp_path: Path) -> None:
    """Slack's bot_token is a number: its default ("") stands in, and must not also be
    said to be missing; Jira's token file cannot be read: no "set email and api_token"."""
    config = tmp_path / "sebridge.toml"
    config.write_text(
        '[slack]\nbot_token = 5\napp_token = "xapp-1-abc"\n'
        '[jira]\nurl = "https://jira.example.com"\nproject = "OPS"\n'
        f'email = "bot@example.com"\napi_token_file = {toml_str(str(tmp_path / "absent"))}\n'
    )
    code, _, err = run("check", config)
    assert code == 2
    assert listed(err) == [
        "slack.bot_token: expected a string, got a number",
        f'jira.api_token_file: cannot read "{tmp_path / "absent"}": No such file or directory',
    ], err


@pytest.mark.timeout(60)
def test_every_broken_template_is_said_by_check_and_by_run(tmp_path: Path) -> None:
    templates = tmp_path / "templates"
    for sink, name, text in (
        ("console", "line.j2", "{{ t.kind "),
        ("teams", "card.j2", "{% if %}"),
    ):
        (templates / sink).mkdir(parents=True)
        (templates / sink / name).write_text(text)
    config = tmp_path / "sebridge.toml"
    store = toml_str(f"sqlite:///{tmp_path / 's.db'}")
    config.write_text(
        f'[imds]\nvm_name = "vm0"\nendpoint = "http://127.0.0.1:{free_port()}"\n'
        f"[store]\nurl = {store}\n"
        f"[templates]\ndir = {toml_str(str(templates))}\n[console]\nenabled = true\n"
        '[teams]\nwebhook_url = "https://example.logic.azure.com/workflows/x?sig=abc"\n'
    )
    code, out, _ = run("check", config)
    assert code == 1, out
    broken = [line for line in out.splitlines() if line.startswith("problem: templates.dir: ")]
    assert [line.split(": ")[2] for line in broken] == ["console", "teams"], out
    assert "console/line.j2 is broken" in broken[0] and "teams/card.j2 is broken" in broken[1]
    code, _, err = run("run", config)
    assert code == 2, err
    assert [p.split(":")[0] for p in listed(err)] == ["console", "teams"], err
