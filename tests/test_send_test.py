"""`sebridge check --send-test` (issue 17, item 7): one clearly marked test message per
channel, and a line per channel saying it arrived or what to fix, against the fakes."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fakes.jira import FakeJira
from fakes.slack import FakeSlack
from fakes.teams import FakeTeams
from helpers import free_port, toml_str
from sebridge.cli.main import main
from sebridge.imds.simulator import Simulator
from sebridge.integrations.jsonl.sink import JsonlSink
from sebridge.model import ScheduledEvent, Transition, TransitionKind
from sebridge.model.message import Message

MARKED = "sebridge test message — no action needed (from vm7: sebridge check --send-test)"


pytestmark = pytest.mark.usefixtures("hermetic")


@pytest.fixture(name="imds")
def vm7_imds() -> Iterator[Simulator]:
    """IMDS for vm7: check always asks it for Scheduled Events, and for its name."""
    with Simulator(port=0, vm_name="vm7") as sim:
        yield sim


def check(tmp_path: Path, imds: Simulator, sections: str, *extra: str) -> tuple[int, str]:
    store = toml_str(f"sqlite:///{tmp_path / 'state.db'}")
    path = tmp_path / "sebridge.toml"
    path.write_text(
        f'[imds]\nvm_name = "vm7"\nendpoint = {toml_str(imds.url)}\n'
        f"[store]\nurl = {store}\n{sections}"
    )
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["check", "--send-test", "--config", str(path), *extra])
    return code, out.getvalue() + err.getvalue()


def slack_section(fake: FakeSlack, token: str | None = None) -> str:
    return (
        f"[slack]\nbot_token = {toml_str(token or fake.bot_token)}\n"
        f'app_token = {toml_str(fake.app_token)}\nchannel = "C0123456789"\n'
        f'approvers = ["U0123ABCD"]\napi_url = {toml_str(fake.url)}\n'
    )


def test_every_channel_gets_one_marked_message(
    tmp_path: Path, imds: Simulator, slack: FakeSlack, teams: FakeTeams
) -> None:
    lines = tmp_path / "events.jsonl"
    lines.write_text("")
    code, out = check(
        tmp_path,
        imds,
        slack_section(slack)
        + f"[teams]\nwebhook_url = {toml_str(teams.workflows_url)}\n"
        + f"[jsonl]\npath = {toml_str(str(lines))}\n",
    )
    assert code == 0, out
    (posted,) = slack.messages.values()
    assert (posted.channel, posted.text) == ("C0123456789", MARKED)
    assert f"ok: slack: test message posted in C0123456789 (ts {posted.ts})" in out
    (shown,) = teams.wait_shown(1)
    assert MARKED in json.dumps(shown.card, ensure_ascii=False)
    assert "ok: teams: test card accepted by the webhook (HTTP 202)" in out
    assert "a test card is posted to try it" in out and "nothing is posted" not in out
    (line,) = [json.loads(x) for x in lines.read_text().splitlines()]
    assert (line["transition"], line["note"], line["vm"]) == ("test", MARKED, "vm7")
    assert f"ok: jsonl: test line appended to {lines}" in out
    assert out.count(MARKED) == 1  # the console's line, printed here
    assert "ok: console: test line printed here" in out
    assert teams.sig not in out


def test_the_jsonl_test_line_has_the_keys_of_a_real_line(tmp_path: Path, imds: Simulator) -> None:
    """A reader keyed on a transition's line (maybe_repeat is false on every line but a
    possible repeat: docs/how-it-works.md) reads the test line too, told apart by "transition": "test"."""
    lines = tmp_path / "events.jsonl"
    event = ScheduledEvent("E1", "Reboot", "Scheduled", ("vm7",), not_before_text="")
    sent = Message(Transition(TransitionKind.SCHEDULED, event, datetime.now(UTC)), "vm7", "ask")
    JsonlSink(str(lines)).send(sent)
    code, out = check(tmp_path, imds, f"[jsonl]\npath = {toml_str(str(lines))}\n")
    assert code == 0, out
    real, test = [json.loads(x) for x in lines.read_text().splitlines()]
    # Every key of a line, but those there only while an approval would be carried out.
    assert list(test) == [k for k in real if k not in ("approve_url", "approve_command")]
    assert "approve_command" in real
    assert (test["transition"], test["note"], test["maybe_repeat"]) == ("test", MARKED, False)
    assert test["event_id"] is None and test["hook"] is None and test["remind_before"] is None


def test_without_send_test_nothing_is_posted(
    tmp_path: Path, imds: Simulator, slack: FakeSlack, teams: FakeTeams
) -> None:
    store = toml_str(f"sqlite:///{tmp_path / 'state.db'}")
    path = tmp_path / "sebridge.toml"
    path.write_text(
        f'[imds]\nvm_name = "vm7"\nendpoint = {toml_str(imds.url)}\n[store]\nurl = {store}\n'
        f"{slack_section(slack)}"
        f"[teams]\nwebhook_url = {toml_str(teams.workflows_url)}\n"
    )
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["check", "--config", str(path)]) == 0
    assert not slack.messages and not teams.posts


def test_a_rejected_slack_token_is_said_once_and_nothing_is_posted(
    tmp_path: Path, imds: Simulator, slack: FakeSlack
) -> None:
    code, out = check(tmp_path, imds, slack_section(slack, token="xoxb-revoked"))
    assert code == 1
    assert out.count("problem:") == 1
    assert (
        "problem: slack.bot_token: auth.test failed: Slack answered invalid_auth: copy the Bot"
        " User OAuth Token again" in out
    )
    assert not slack.messages


def test_a_post_slack_refuses_after_a_passing_check_says_what_to_fix(
    tmp_path: Path, imds: Simulator, slack: FakeSlack
) -> None:
    slack.fail_next("chat.postMessage", "is_archived")
    code, out = check(tmp_path, imds, slack_section(slack))
    assert code == 1
    assert "ok: slack: channel #ops: the bot is a member" in out
    assert (
        "problem: slack.channel: test message not posted (Slack answered is_archived): the"
        " channel is archived: unarchive it, or name another" in out
    )
    assert not slack.messages


def test_a_slack_that_is_down(tmp_path: Path, imds: Simulator) -> None:
    with FakeSlack() as slack:
        section = slack_section(slack)
    code, out = check(tmp_path, imds, section)
    assert code == 1
    assert f"problem: slack.api_url: cannot reach Slack at {slack.url}" in out
    assert out.count("problem:") == 1


@pytest.mark.parametrize(
    ("status", "says"),
    [
        (
            401,
            "teams.webhook_url: test card not delivered: teams.webhook_url was refused (HTTP 401",
        ),
        (404, "teams.webhook_url: test card not delivered: teams.webhook_url was not found (HTTP"),
        (503, "teams.webhook_url: test card not delivered: Teams failed (HTTP 503)"),
    ],
)
def test_teams_refusals_say_what_to_fix(
    tmp_path: Path, imds: Simulator, teams: FakeTeams, status: int, says: str
) -> None:
    teams.fail_next(status)
    code, out = check(tmp_path, imds, f"[teams]\nwebhook_url = {toml_str(teams.workflows_url)}\n")
    assert code == 1
    assert f"problem: {says}" in out
    assert "will retry" not in out and teams.sig not in out


def test_a_teams_webhook_that_is_down(tmp_path: Path, imds: Simulator) -> None:
    url = f"http://127.0.0.1:{free_port()}/workflows/x/triggers/manual/paths/invoke?sig=abc"
    code, out = check(tmp_path, imds, f"[teams]\nwebhook_url = {toml_str(url)}\n")
    assert code == 1
    assert (
        "problem: teams.webhook_url: test card not delivered: cannot reach the webhook"
        " (connection refused)" in out
    )


def test_a_messagecard_connector_gets_a_messagecard(
    tmp_path: Path, imds: Simulator, teams: FakeTeams
) -> None:
    code, out = check(
        tmp_path,
        imds,
        f'[teams]\nwebhook_url = {toml_str(teams.connector_url)}\nformat = "messagecard"\n',
    )
    assert code == 0, out
    (shown,) = teams.wait_shown(1)
    assert shown.kind == "messagecard" and MARKED in shown.card["text"]
    assert "ok: teams: test card posted by the connector (HTTP 200)" in out


@pytest.mark.parametrize("flavour", ["cloud", "datacenter"])
def test_jira_is_checked_without_a_ticket(tmp_path: Path, imds: Simulator, flavour: str) -> None:
    with FakeJira(flavour) as jira:
        auth = (
            f"email = {toml_str(jira.email)}\napi_token = {toml_str(jira.token)}\n"
            if flavour == "cloud"
            else f"pat = {toml_str(jira.pat)}\n"
        )
        section = f'[jira]\nurl = {toml_str(jira.url)}\nproject = "OPS"\n{auth}'
        code, out = check(tmp_path, imds, section)
        assert code == 0, out
        assert "ok: jira: no test issue created (it would stay in OPS); the account may" in out
        jira.denied = {"CREATE_ISSUES", "TRANSITION_ISSUES"}
        code, out = check(tmp_path, imds, section)
        assert code == 1
        assert (
            "problem: jira.project: no test issue created; the account lacks Create Issues, "
            "Transition Issues in OPS" in out
        )
        assert not jira.issues and not jira.calls_to("POST", "issue")
        assert jira.token not in out and jira.pat not in out


def test_a_jsonl_file_that_is_not_there_is_not_created(tmp_path: Path, imds: Simulator) -> None:
    lines = tmp_path / "events.jsonl"
    code, out = check(tmp_path, imds, f"[jsonl]\npath = {toml_str(str(lines))}\n")
    assert code == 0, out
    assert f"ok: jsonl: {lines} does not exist yet: no test line written" in out
    assert not lines.exists()


def test_json_output_stays_json(tmp_path: Path, imds: Simulator) -> None:
    code, out = check(tmp_path, imds, '[jsonl]\npath = "-"\n', "--json")
    assert code == 0
    report, _, rest = out.partition("\n}\n")
    found = json.loads(report + "\n}")
    assert any(line.startswith("console: test line printed") for line in found["ok"])
    assert MARKED in rest  # the console's and JSON lines' test lines went to stderr


def test_a_missing_read_scope_is_one_problem(tmp_path: Path, imds: Simulator) -> None:
    with FakeSlack(scopes=["chat:write"]) as slack:
        code, out = check(tmp_path, imds, slack_section(slack))
    assert code == 1
    (problem,) = [line for line in out.splitlines() if line.startswith("problem:")]
    assert "slack.bot_token: the token lacks scopes channels:history, channels:read" in problem
    assert not slack.messages  # a channel that failed its check gets no test message


def _check_without_vm_name(tmp_path: Path, endpoint: str) -> tuple[int, str]:
    store = toml_str(f"sqlite:///{tmp_path / 'state.db'}")
    path = tmp_path / "sebridge.toml"
    path.write_text(f"[imds]\nendpoint = {toml_str(endpoint)}\n[store]\nurl = {store}\n")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["check", "--send-test", "--config", str(path)])
    return code, out.getvalue() + err.getvalue()


def test_without_vm_name_the_test_message_names_the_vm_imds_names(tmp_path: Path) -> None:
    with Simulator(port=0, vm_name="vmss_5") as sim:
        code, out = _check_without_vm_name(tmp_path, sim.url)
    assert code == 0, out
    assert (
        "ok: imds: this VM's name is vmss_5 (IMDS's compute name; imds.vm_name is not set)" in out
    )
    assert (
        "sebridge test message — no action needed (from vmss_5: sebridge check --send-test)" in out
    )


@pytest.mark.slow
def test_without_vm_name_and_imds_the_test_message_says_the_name_is_unknown(tmp_path: Path) -> None:
    code, out = _check_without_vm_name(tmp_path, f"http://127.0.0.1:{free_port()}")
    assert code == 1, out
    assert (
        "sebridge test message — no action needed (from a VM whose name is unknown: "
        "sebridge check --send-test)"
    ) in out


@pytest.mark.parametrize("flavour", ["cloud", "datacenter"])
def test_jira_problems_of_the_test_name_the_key_and_the_cause(
    tmp_path: Path, imds: Simulator, flavour: str
) -> None:
    """Jira's check passed; then Jira refuses the test's request, or drops it."""
    with FakeJira(flavour) as jira:
        auth = (
            f"email = {toml_str(jira.email)}\napi_token = {toml_str(jira.token)}\n"
            if flavour == "cloud"
            else f"pat = {toml_str(jira.pat)}\n"
        )
        section = f'[jira]\nurl = {toml_str(jira.url)}\nproject = "OPS"\n{auth}'
        jira.fail("GET", "mypermissions", 401)
        code, out = check(tmp_path, imds, section)
        assert code == 1, out
        key = "jira.api_token" if flavour == "cloud" else "jira.pat"
        assert (
            f"problem: {key}: no test issue created; cannot read your permissions in OPS:"
            " Jira refused the credentials (401)" in out
        ), out
        jira.fail("GET", "mypermissions", drop=True)
        code, out = check(tmp_path, imds, section)
        assert code == 1, out
        assert (
            "problem: jira.url: no test issue created; cannot read your permissions in OPS:"
            f" cannot reach Jira at {jira.url}: connection reset" in out
        ), out
        assert jira.token not in out and jira.pat not in out


def test_a_teams_webhook_that_hangs_says_it_timed_out(
    tmp_path: Path, imds: Simulator, teams: FakeTeams
) -> None:
    """Within check's deadline, Teams' own timeout ends the post: the line says why."""
    release = teams.hold_next()
    try:
        code, out = check(
            tmp_path,
            imds,
            f"[teams]\nwebhook_url = {toml_str(teams.workflows_url)}\ntimeout = 0.3\n",
        )
    finally:
        release.set()
    assert code == 1, out
    assert (
        "problem: teams.webhook_url: test card not delivered: the webhook took the card and"
        " did not answer within 0.3 s (teams.timeout)" in out
    ), out
    assert teams.sig not in out
