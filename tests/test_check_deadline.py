"""`sebridge check` (issue 24, item 4): IMDS is always asked, even with `imds.vm_name` set,
and its name compared with IMDS's; the checks that reach out run side by side under one
deadline (`--timeout`), a check still waiting then being a problem naming its key."""

from __future__ import annotations

import contextlib
import io
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from fakes.jira import FakeJira
from fakes.slack import FakeSlack
from fakes.teams import FakeTeams
from helpers import toml_str, write_config
from sebridge.cli.main import main
from sebridge.imds.simulator import Simulator

pytestmark = pytest.mark.usefixtures("hermetic")


def check(config: Path, *extra: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["check", "--config", str(config), "--environment", "/dev/null", *extra])
    return code, out.getvalue(), err.getvalue()


def lines(out: str, kind: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(f"{kind}: ")]


# ---- IMDS, with imds.vm_name set


def test_with_vm_name_an_imds_that_does_not_answer_is_a_problem(
    tmp_path: Path, refused_port: int
) -> None:
    endpoint = f"http://127.0.0.1:{refused_port}"
    config = write_config(
        tmp_path / "sebridge.toml", endpoint=endpoint, db=tmp_path / "s.db", vm_name="vm7"
    )
    code, out, _ = check(config)
    assert code == 1, out
    assert lines(out, "problem") == [
        f"problem: imds.endpoint: Scheduled Events did not answer: cannot reach IMDS at"
        f" {endpoint} (connection refused); is this an Azure VM, or is the simulator running?"
    ]


def test_with_vm_name_imds_is_asked_for_the_document_and_its_name_agrees(
    tmp_path: Path, sim: Simulator
) -> None:
    sim.schedule("Reboot")
    config = write_config(
        tmp_path / "sebridge.toml", endpoint=sim.url, db=tmp_path / "s.db", vm_name="vm0"
    )
    code, out, _ = check(config)
    assert code == 0, out
    asked = [(r.method, r.path) for r in sim.requests]
    assert ("GET", "/metadata/scheduledevents") in asked
    assert ("GET", "/metadata/instance/compute") in asked
    assert (
        f"ok: imds: Scheduled Events answered at {sim.url} (api-version 2020-07-01): 1 event,"
        f" DocumentIncarnation {sim.incarnation}" in out
    )
    assert "ok: imds: imds.vm_name vm0 is IMDS's compute name" in out
    assert lines(out, "warning") == []


def test_a_vm_name_other_than_imds_compute_name_is_a_warning_saying_both(
    tmp_path: Path, sim: Simulator
) -> None:
    config = write_config(
        tmp_path / "sebridge.toml", endpoint=sim.url, db=tmp_path / "s.db", vm_name="VM-0"
    )
    code, out, _ = check(config)
    assert code == 0, out  # Resources may spell it so: a warning, not a problem
    (warning,) = lines(out, "warning")
    assert warning.startswith(
        "warning: imds.vm_name: VM-0 differs from IMDS's compute name vm0: events are matched"
        " to this VM by imds.vm_name"
    )
    assert warning.endswith("keep it if Resources list VM-0, else set it to vm0")
    code, out, _ = check(config, "--json")
    assert any(w.startswith("imds.vm_name: VM-0 differs") for w in _json(out)["warnings"])


def _json(out: str) -> dict[str, list[str]]:
    import json

    found: dict[str, list[str]] = json.loads(out)
    return found


# ---- one deadline for every check


@pytest.fixture
def silent_postgres() -> Iterator[str]:
    """A PostgreSQL address that takes connections and never says a word (the kernel
    accepts them into the backlog): a store that hangs."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"postgresql://sebridge@127.0.0.1:{listener.getsockname()[1]}/sebridge"


@pytest.mark.timeout(120)
def test_hanging_endpoints_are_each_a_problem_at_the_deadline(
    tmp_path: Path, sim: Simulator, silent_postgres: str
) -> None:
    """IMDS, the store, Slack, Teams and Jira all hang: with --timeout 1, check ends with
    a line for each, in the order of the checks, the test message's too."""
    released = threading.Event()
    sim.inject("hang", count=5, seconds=20)  # the simulator's stop cuts it short
    with FakeSlack() as slack, FakeTeams() as teams, FakeJira("datacenter") as jira:
        holds = [released, slack.hold_next("auth.test"), teams.hold_next()]
        for path in ("serverInfo", "myself"):
            jira.fail("GET", path, 200, after=True, hold=released)
        try:
            config = write_config(
                tmp_path / "sebridge.toml",
                endpoint=sim.url,
                store_url=silent_postgres,
                vm_name="vm0",
                extra=(
                    f"[slack]\nbot_token = {toml_str(slack.bot_token)}\n"
                    f"app_token = {toml_str(slack.app_token)}\n"
                    f'channel = "C0123456789"\napi_url = {toml_str(slack.url)}\n'
                    f"[teams]\nwebhook_url = {toml_str(teams.workflows_url)}\n"
                    f'[jira]\nurl = {toml_str(jira.url)}\nproject = "OPS"\n'
                    f"pat = {toml_str(jira.pat)}\n"
                ),
            )
            # Teams' check posts nothing: its hold is the test card's post.
            code, out, _ = check(config, "--send-test", "--timeout", "1")
        finally:
            for hold in holds:
                hold.set()
    assert code == 1, out
    late = [line for line in lines(out, "problem") if "no answer within 1 s" in line]
    assert [line.split(":")[1].strip() for line in late] == [
        "store.url",
        "imds.endpoint",
        "slack.api_url",
        "teams.webhook_url",
        "jira.url",
    ], out
    assert "try --timeout 120" in late[1]  # IMDS's first request may take that long
    assert "ok: teams: webhook_url is" in out  # what a check said before its deadline stays
