"""Issue 34, findings 4 and 11: waiting for the VMs' readiness is said as such, never as IMDS
not answering, and `sebridge approve` waits through the prepare hooks up to `--wait`.

A daemon in this process (`Runner.run` on a thread) on a SQLite file polls the IMDS
simulator; its prepare hook `slow` runs until the test creates tmp_path/release. The CLI
runs in this process too, beside the daemon, as a person's shell would.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from helpers import RunnerThread, cli_main, wait_until
from link_bridge import LinkBridge
from sebridge.cli.runtime import build_runner
from sebridge.imds.simulator import Simulator
from sebridge.integrations.registry import load_config
from sebridge.kernel.clock import utcnow
from sebridge.store import Store

SLOW = (
    "import pathlib, time\n"
    "release = pathlib.Path(__file__).parent / 'release'\n"
    "deadline = time.monotonic() + 30\n"
    "while not release.exists() and time.monotonic() < deadline:\n"
    "    time.sleep(0.05)\n"
    "print('drained')\n"
)


def text_of(html: str) -> str:
    """What a person reads: tags dropped, whitespace collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def slow_hook(tmp_path: Path) -> list[str]:
    path = tmp_path / "slow.py"
    path.write_text(SLOW)
    return [sys.executable, str(path)]


def release(tmp_path: Path) -> None:
    (tmp_path / "release").touch()


# ------------------------------------------------------------------ the page (finding 4)


def test_the_page_says_it_waits_for_the_vms_readiness_not_that_azure_did_not_answer(
    sim: Simulator, tmp_path: Path
) -> None:
    """Finding 4: the fleet's page answered "Azure did not answer yet. sebridge keeps trying
    on every poll" when nothing had been sent: another agent's carrier had claimed the
    approval waiting for readiness. The page says it waits, naming the VMs, while it waits,
    claimed or not; only a POST IMDS did not answer is said as such."""
    bridge = LinkBridge(
        sim,
        tmp_path,
        {
            "policy": {"rules": [{"action": "ask", "prepare": ["slow"]}]},
            "hooks": {"slow": {"command": slow_hook(tmp_path)}},
        },
    )
    try:
        event_id = bridge.schedule("Reboot", resources=["vm0"])
        link = bridge.link(event_id)
        said = text_of(bridge.post(link, name="Ann").text)
        waiting = re.compile(
            r"Approval recorded, not sent to Azure yet: waiting for the VMs' readiness: vm0: "
            r"(preparing \(slow running\)|waiting \(slow not started\))\. StartRequests goes"
        )
        assert waiting.search(said), said
        assert "did not answer" not in said
        # Another agent's carrier claims it at this moment (a fleet's round), then puts it back.
        other = Store(bridge.config.store.url, agent="vm0")
        try:
            wait_until(lambda: "running" in text_of(bridge.get(link).text), 10)
            claimed = other.approvals.claim(utcnow(), timedelta(seconds=60))
            assert [c.state for c in claimed] == ["waiting"]
            for _ in ("claimed", "put back"):
                seen = text_of(bridge.get(link).text)
                assert "waiting for the VMs' readiness: vm0: preparing (slow running)" in seen
                assert "did not answer" not in seen and "keeps trying" not in seen
                other.approvals.put_back(claimed)
        finally:
            other.close()
        release(tmp_path)
        wait_until(lambda: sim.start_requests == [event_id], 10, message="StartRequests")
    finally:
        bridge.stop()


# ------------------------------------------------------------------ approve --wait (finding 11)


@pytest.fixture
def daemon(sim: Simulator, tmp_path: Path) -> Iterator[Path]:
    """`sebridge run` (in this process) with one rule: ask, prepare `slow` (or `fails`)."""
    fails = tmp_path / "fails.py"
    fails.write_text("import sys\nprint('lb said 503')\nsys.exit(1)\n")
    cfg = tmp_path / "sebridge.toml"
    cfg.write_text(
        f'[imds]\nendpoint = "{sim.url}"\npoll_interval = 0.2\nvm_name = "vm0"\n'
        f'[store]\nurl = "sqlite:///{tmp_path / "state.db"}"\n'
        "[console]\nenabled = false\n[dispatch]\nshutdown_grace_seconds = 1.0\n"
        '[[policy.rules]]\nname = "fragile"\naction = "ask"\nevent_types = ["Redeploy"]\n'
        'prepare = ["fails"]\n'
        '[[policy.rules]]\nname = "drain"\naction = "ask"\nprepare = ["slow"]\n'
        f"[hooks.slow]\ncommand = {slow_hook(tmp_path)!r}\n".replace("'", '"')
        + f"[hooks.fails]\ncommand = {[sys.executable, str(fails)]!r}\n".replace("'", '"')
    )
    running = RunnerThread(build_runner(load_config(cfg)))
    running.start()
    yield cfg
    release(cfg.parent)
    running.stop()


def scheduled(sim: Simulator, cfg: Path, event_type: str) -> str:
    """An event listing vm0, once the daemon recorded it."""
    event_id = sim.schedule(event_type, resources=["vm0"], notice=1800)
    wait_until(lambda: event_id in cli_main("events", "--config", str(cfg))[1], 10)
    return event_id


def test_approve_waits_through_the_prepare_hooks_and_exits_by_what_happened(
    sim: Simulator, daemon: Path, tmp_path: Path
) -> None:
    """Finding 11: `sebridge approve` answered "waiting for prepare hooks" (exit 4) in under
    a second while the docs say it waits up to 10 s for the outcome."""
    cfg = str(daemon)
    event_id = scheduled(sim, daemon, "Reboot")
    # The drain ends 1.5 s after the approval: approve waits for it and says it was carried out.
    threading.Timer(1.5, release, (tmp_path,)).start()
    began = time.monotonic()
    code, out, err = cli_main("approve", event_id, "--as", "judy", "--wait", "10s", "--config", cfg)
    took = time.monotonic() - began
    assert code == 0, out + err
    assert out == f"approved {event_id} as judy: StartRequests sent to Azure\n"
    assert 1.4 < took < 10
    assert sim.start_requests == [event_id]


def test_approve_says_still_waiting_at_its_deadline_and_held_when_held(
    sim: Simulator, daemon: Path
) -> None:
    cfg = str(daemon)
    event_id = scheduled(sim, daemon, "Reboot")
    began = time.monotonic()
    code, out, _ = cli_main("approve", event_id, "--as", "judy", "--wait", "1", "--config", cfg)
    assert code == 4
    assert 0.9 < time.monotonic() - began < 5
    assert out.startswith(
        f"approval of {event_id} by judy still waiting after 1 s: waiting for prepare hooks: "
        "vm0: preparing (slow running); StartRequests goes to Azure once they succeed."
    ), out
    assert f"Ways out: sebridge approve {event_id} --anyway" in out

    held_id = scheduled(sim, daemon, "Redeploy")
    code, out, _ = cli_main("approve", held_id, "--as", "judy", "--config", cfg)
    assert code == 4
    assert out.startswith(
        f"approval of {held_id} by judy: held: fails failed (exit 1) on vm0: lb said 503; "
        "nothing sent to Azure."
    ), out
    assert f"sebridge hooks retry {held_id}" in out
    assert sim.start_requests == []
    # A wait that is not a duration is refused by the parser.
    assert cli_main("approve", held_id, "--wait", "soon", "--config", cfg)[0] == 2
