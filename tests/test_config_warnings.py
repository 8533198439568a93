"""What the config says beyond a refusal (issue 22): `run` and `once` log each warning
`check` prints, once, at start; a key that does nothing with its sink off is refused."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import DaemonProcess, cli_main, wait_until, write_config
from sebridge.imds.simulator import Simulator
from sebridge.integrations.registry import config_from_mapping
from sebridge.kernel.errors import ConfigError

pytestmark = pytest.mark.usefixtures("cli_in_process")

# A hook no rule names never runs: worth a warning, not worth refusing to start.
SPARE_HOOK = '[hooks.spare]\ncommand = ["true"]\n'
WARNING = "hooks.spare: no rule names it, so it never runs"


@pytest.fixture
def config(tmp_path: Path, sim: Simulator) -> Path:
    return write_config(
        tmp_path / "sebridge.toml",
        endpoint=sim.url,
        db=tmp_path / "state.db",
        vm_name="vm0",
        extra=SPARE_HOOK,
    )


def test_check_prints_the_warning(config: Path) -> None:
    code, out, err = cli_main("check", "--config", str(config))
    assert code == 0, err
    assert f"warning: {WARNING}" in out.splitlines()


def test_once_logs_each_warning_once(config: Path) -> None:
    code, _, err = cli_main("once", "--config", str(config))
    assert code == 0, err
    said = [line for line in err.splitlines() if WARNING in line]
    assert len(said) == 1, err
    assert "WARNING sebridge.config: " + WARNING in said[0]


def test_run_logs_each_warning_once_at_start(
    config: Path, sim: Simulator, start_daemon: Callable[..., DaemonProcess]
) -> None:
    daemon = start_daemon(config, sim)  # returns once it polled: its start is behind it
    wait_until(lambda: WARNING in daemon.log_text(), message="the warning in the log")
    daemon.signal(signal.SIGTERM)
    assert daemon.wait(30) == 0, daemon.log_text()
    said = [line for line in daemon.log_text().splitlines() if WARNING in line]
    assert len(said) == 1, daemon.log_text()
    assert "WARNING sebridge.config: " + WARNING in said[0]


def test_a_remind_mention_with_slack_off_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_mapping({"slack": {"remind_mention": "<!here>"}}, source="f.toml")
    assert str(caught.value) == (
        "f.toml: slack.remind_mention: set while Slack is off (slack.bot_token is not set):"
        " no reminder would mention anyone; set slack.bot_token, or remove the key"
    )


def test_a_remind_mention_with_slack_on_is_taken() -> None:
    slack = {"bot_token": "xoxb-1", "app_token": "xapp-1", "channel": "C1"}
    config = config_from_mapping({"slack": {**slack, "remind_mention": "<!here>"}})
    assert config.section("slack").remind_mention == "<!here>"
    # Off and empty is the default, nothing to refuse.
    assert config_from_mapping({"slack": {"remind_mention": ""}}).section("slack").enabled is False
