"""A hook that prints every secret it can reach shows none of them anywhere (issue 23, item 1).

`sebridge run` as a real process against the IMDS simulator, with Slack, Jira and Teams
fakes, the console, JSON lines and the approval page: the Slack bot token comes from an
environment variable the hook's `inherit_env` names, the Slack app token and the Jira
token from files, the Teams webhook URL and the link key from variables no hook names.
The hook runs `env`, then `cat`s every secret, and exits 1: the failure is shown
everywhere, each secret as "***". See docs/ARCHITECTURE.md, "Readiness hooks".
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from helpers import (
    DaemonProcess,
    cli_env,
    free_port,
    run_cli,
    toml_str,
    wait_line,
    wait_until,
    write_config,
)
from rigs.jira import JiraRig
from rigs.slack import SlackRig
from rigs.teams import TeamsRig
from sebridge.imds.simulator import Simulator
from sebridge.kernel.clock import utcnow
from sebridge.web.links import LinkSigner

pytestmark = pytest.mark.slow

# In the daemon's environment, named by no hook: never in a hook's environment.
UNNAMED = "UNNAMED_SECRET"


def test_a_failed_hook_that_prints_every_secret_shows_none_anywhere(
    sim: Simulator, tmp_path: Path, start_daemon: Callable[..., DaemonProcess]
) -> None:
    with SlackRig() as slack, JiraRig() as jira, TeamsRig() as teams:
        link_key = secrets.token_urlsafe(32)
        files = {
            "app_token": slack.fake.app_token,
            "jira_token": jira.fake.token,
            "teams_url": teams.fake.workflows_url,
            "link_key": link_key,
        }
        for name, value in files.items():
            (tmp_path / name).write_text(value + "\n")
        daemon_env = {
            "SLACK_BOT_TOKEN": slack.fake.bot_token,
            "TEAMS_URL": teams.fake.workflows_url,
            "LINK_KEY": link_key,
            UNNAMED: f"never-named-{secrets.token_hex(8)}",
        }
        every_secret = [
            *slack.secrets(),
            *jira.secrets(),
            *teams.secrets(),
            teams.fake.workflows_url,
            link_key,
            daemon_env[UNNAMED],
        ]
        seen_env = tmp_path / "hook-env.txt"
        drain = tmp_path / "drain.sh"
        cats = " ".join(str(tmp_path / name) for name in files)
        drain.write_text(
            "#!/bin/sh\n"
            f"env > {seen_env}\n"
            "env\n"
            "echo 'pool web: 3 sessions left'\n"
            f"cat {cats}\n"
            'echo "bot: $SLACK_BOT_TOKEN again: $TOKEN_AGAIN"\n'
            "exit 1\n"
        )
        drain.chmod(0o755)
        port = free_port()
        out = tmp_path / "out.jsonl"
        config = write_config(
            tmp_path / "sebridge.toml",
            endpoint=sim.url,
            db=tmp_path / "state.db",
            jsonl=out,
            console=True,
            vm_name="vm0",
            extra=(
                "[http]\n"
                f'listen = "127.0.0.1:{port}"\n'
                f'public_url = "http://127.0.0.1:{port}"\n'
                'link_secret = "${LINK_KEY}"\n'
                "[slack]\n"
                'bot_token = "${SLACK_BOT_TOKEN}"\n'
                f"app_token_file = {toml_str(str(tmp_path / 'app_token'))}\n"
                'channel = "C0123456789"\n'
                f"api_url = {toml_str(slack.fake.url)}\n"
                "[jira]\n"
                f"url = {toml_str(jira.fake.url)}\n"
                f"email = {toml_str(jira.fake.email)}\n"
                f"api_token_file = {toml_str(str(tmp_path / 'jira_token'))}\n"
                'project = "OPS"\n'
                "[teams]\n"
                'webhook_url = "${TEAMS_URL}"\n'
                "[[policy.rules]]\n"
                'name = "drain first"\naction = "approve"\nprepare = ["drain"]\n'
                "[hooks.drain]\n"
                f"command = [{toml_str(str(drain))}]\n"
                "timeout = 30\n"
                'inherit_env = ["SLACK_BOT_TOKEN"]\n'
                'env = { TOKEN_AGAIN = "${SLACK_BOT_TOKEN}", POOL = "web" }\n'
            ).replace("[policy]\n", ""),
        )
        console = tmp_path / "console.txt"
        daemon = start_daemon(config, sim, env=daemon_env, stdout=console)
        event_id = sim.schedule("Reboot")
        failed = wait_line(out, event_id, "hook_failed", timeout=30)
        wait_line(out, event_id, "held", timeout=30)

        # The hook's environment: clean, with what its config names.
        names = {line.partition("=")[0] for line in seen_env.read_text().splitlines()}
        assert UNNAMED not in names and "TEAMS_URL" not in names and "LINK_KEY" not in names
        assert {"PATH", "SLACK_BOT_TOKEN", "TOKEN_AGAIN", "POOL", "SEBRIDGE_EVENT_ID"} <= names

        # Shown, and masked: the failure's tail as each place shows it.
        assert failed["exit_code"] == 1
        assert "bot: *** again: ***" in failed["output"]
        assert "SLACK_BOT_TOKEN=***" in failed["output"]
        assert "pool web: 3 sessions left\n***\n***\n***\n***\n" in failed["output"]
        shown = "bot: *** again: ***"

        def delivered(texts: Callable[[], str]) -> Callable[[], bool]:
            # (Teams' markdown and Jira's wiki markup escape the mask's asterisks)
            return lambda: "bot: " in texts() and " again: " in texts()

        def slack_texts() -> str:
            return json.dumps([c.params for c in slack.fake.calls])

        def teams_texts() -> str:
            return json.dumps([p.body for p in teams.fake.posts])

        def jira_texts() -> str:
            return json.dumps(list(jira.fake.issues.values()))

        for texts in (slack_texts, teams_texts, jira_texts):
            wait_until(delivered(texts), 30, message=f"the hook's failure in {texts.__name__}")
        wait_until(lambda: shown in console.read_text(), 30, message="the console's line")

        history = run_cli("history", event_id, "--config", str(config), env=cli_env(**daemon_env))
        assert history.returncode == 0, history.stderr
        assert shown in history.stdout

        # The page: to a valid link, the bounded tail, masked; to any other token, nothing.
        signer = LinkSigner(link_key)
        token = signer.token(event_id, utcnow() + timedelta(hours=1))
        page = _get(f"http://127.0.0.1:{port}/approve/{token}")
        assert page[0] == 200 and "bot: *** again: ***" in page[1]
        forged = LinkSigner(secrets.token_urlsafe(32)).token(
            event_id, utcnow() + timedelta(hours=1)
        )
        refused = _get(f"http://127.0.0.1:{port}/approve/{forged}")
        assert refused == (403, "Forbidden")

        with sqlite3.connect(tmp_path / "state.db") as db:
            (stored,) = db.execute("SELECT output FROM hook_runs").fetchone()
            dump = "\n".join(db.iterdump())
        assert shown in stored
        everywhere = {
            "store": dump,
            "json lines": out.read_text(),
            "console": console.read_text(),
            "log": daemon.log_text(),
            "slack": slack_texts(),
            "teams": teams_texts(),
            "jira": jira_texts(),
            "history": history.stdout + history.stderr,
            "page": page[1],
        }
        for where, text in everywhere.items():
            for secret in every_secret:
                assert secret not in text, f"a secret in the {where}"


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
