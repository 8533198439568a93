"""`sebridge check` with [jira]: sign-in, project, issue type, workflow statuses, no token shown."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest

from fakes.jira import FakeJira
from helpers import toml_str
from sebridge.cli.main import main
from sebridge.imds.simulator import Simulator

pytestmark = pytest.mark.usefixtures("hermetic")


def check(tmp_path: Path, sim: Simulator, jira: FakeJira, **keys: Any) -> tuple[int, str]:
    auth = (
        {"email": jira.email, "api_token": jira.token}
        if jira.flavour == "cloud"
        else {"pat": jira.pat}
    )
    section = {"url": jira.url, "project": "OPS", **auth, **keys}
    store = toml_str(f"sqlite:///{tmp_path / 'state.db'}")
    imds = f'[imds]\nvm_name = "vm0"\nendpoint = {toml_str(sim.url)}\n'
    text = f"{imds}[store]\nurl = {store}\n[jira]\n" + "".join(
        f"{k} = {toml_str(str(v))}\n" for k, v in section.items()
    )
    path = tmp_path / "sebridge.toml"
    path.write_text(text, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["check", "--config", str(path)])
    return code, out.getvalue() + err.getvalue()


def test_everything_in_order(tmp_path: Path, sim: Simulator, jira: FakeJira) -> None:
    code, out = check(tmp_path, sim, jira, approve_status="Approved")
    assert code == 0, out
    kind = "Cloud" if jira.flavour == "cloud" else "Server"
    assert f"ok: jira: signed in to {jira.url} ({kind}) as sebridge bot" in out
    assert "ok: jira: project OPS: OPS project" in out
    assert 'ok: jira: issue type "Task" belongs to OPS' in out
    assert 'ok: jira: jira.done_transition "Done" is a status of the Task workflow' in out
    assert 'ok: jira: jira.approve_status "Approved" is a status of the Task workflow' in out
    assert "sinks: console, jira" in out
    assert not jira.issues  # check creates nothing


def test_bad_credentials_say_what_to_fix_without_the_token(
    tmp_path: Path, sim: Simulator, jira: FakeJira
) -> None:
    wrong = "wrong-token-" + jira.token
    key = "api_token" if jira.flavour == "cloud" else "pat"
    code, out = check(tmp_path, sim, jira, **{key: wrong})
    assert code == 1
    said = f"problem: jira.{key}: cannot sign in (myself): Jira refused the credentials (401)"
    assert said in out, out
    assert wrong not in out and jira.token not in out and jira.pat not in out


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        (
            {"project": "NOPE"},
            "problem: jira.project: cannot read project NOPE: not found (404) (No project could"
            " be found with key 'NOPE'.)",
        ),
        (
            {"issue_type": "Epic"},
            'problem: jira.issue_type: issue type "Epic" is not in project OPS (it has "Task",'
            ' "Bug")',
        ),
        ({"done_transition": "Resolved"}, 'problem: jira.done_transition: "Resolved" is not a'),
        (
            {"approve_status": "Go"},
            'problem: jira.approve_status: "Go" is not a status of the Task workflow',
        ),
    ],
)
def test_problems_name_the_key(
    tmp_path: Path, sim: Simulator, jira: FakeJira, keys: dict[str, str], expected: str
) -> None:
    code, out = check(tmp_path, sim, jira, **keys)
    assert code == 1
    assert expected in out, out


def test_unreachable_jira(tmp_path: Path, sim: Simulator, jira: FakeJira) -> None:
    jira.fail("GET", "myself", drop=True)
    code, out = check(tmp_path, sim, jira)
    assert code == 1
    assert f"problem: jira.url: cannot sign in (myself): cannot reach Jira at {jira.url}: " in out
