"""Getting started's "Running it on a VM" runs as written (issue 17, item 1).

The install commands are read from the page itself (docs/getting-started.md, the block
after the comment that names this file), so the two cannot drift apart; the README's
five-minute path shows the same block, word for word. They run as
written in a copy of the checkout, with the system paths they touch moved
into a throwaway root; only the lines that change the machine itself
(apt-get, systemctl) are left out, and the test says which. The unit is then
verified with `systemd-analyze verify`, its ExecStart pointed at the venv
the commands made.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from pages import page

ROOT = Path(__file__).resolve().parent.parent
MARK = "<!-- The block below is run by tests/test_install.py"
# Paths the commands write to, and where the test moves each.
MOVED = ("/opt/sebridge", "/etc/systemd/system", "/etc/sebridge", "/usr/local/bin")
# Commands that act on the machine, not on files: not run here.
NOT_RUN = ("apt-get", "systemctl")

pytestmark = pytest.mark.slow


def install_block(name: str) -> str:
    """A page's install block: the one after the comment that names this file."""
    text = page(name)
    after = text[text.index(MARK) :]
    block = re.search(r"```sh\n(.*?)```", after, re.S)
    assert block is not None
    return block.group(1)


def install_commands() -> list[str]:
    """Getting started's install block, one command per line."""
    return [line for line in install_block("getting-started.md").splitlines() if line.strip()]


def test_the_readmes_five_minute_path_is_the_block_run_here() -> None:
    assert install_block("README.md") == install_block("getting-started.md")


def moved(command: str, root: Path) -> str:
    for path in MOVED:
        command = command.replace(path, f"{root}{path}")
    return command


def checkout_copy(into: Path) -> Path:
    """The repository's files (tracked and new, not ignored): pip builds in its folder. A
    symbolic link stays one, as a clone has it (src/sebridge/templates is one: copied as
    a file it was left out, and the installed package had no templates)."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_symlink():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            (into / name).symlink_to(os.readlink(source))
        elif source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    return into


def test_the_install_commands_run_and_the_unit_verifies(tmp_path: Path) -> None:
    commands = install_commands()
    skipped = [c for c in commands if c.split()[0] in NOT_RUN]
    assert [c.split()[0] for c in skipped] == ["apt-get", "systemctl"], skipped
    root = tmp_path / "root"
    checkout = checkout_copy(tmp_path / "checkout")
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("SEBRIDGE_CONFIG", "VIRTUAL_ENV")},
        "PATH": f"{root}/usr/local/bin:{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    for there in ("usr/local/bin", "etc/systemd/system", "opt"):  # as on a fresh VM
        (root / there).mkdir(parents=True)
    store = Path("/var/lib/sebridge/state.db")
    store_was_there = store.exists()
    outputs = []
    for command in commands:
        if command in skipped:
            continue
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", moved(command, root)],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        outputs.append((command, done.stdout))
        if command.startswith("sebridge check") and done.returncode == 1:
            # This machine is no Azure VM: IMDS cannot name it, which on a VM it does (the
            # example config leaves imds.vm_name to IMDS). That must be the one problem.
            problems = [line for line in done.stdout.splitlines() if line.startswith("problem:")]
            assert len(problems) == 1, done.stdout
            assert problems[0].startswith("problem: imds.vm_name: not set"), done.stdout
            continue
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"

    venv = root / "opt" / "sebridge"
    version = subprocess.run(
        [venv / "bin" / "sebridge", "--version"], capture_output=True, text=True, check=True
    )
    assert version.stdout.startswith("sebridge ")
    etc = root / "etc" / "sebridge"
    assert (etc / "sebridge.toml").read_bytes() == (ROOT / "config" / "example.toml").read_bytes()
    assert stat.S_IMODE((etc / "credentials").stat().st_mode) == 0o700
    # `sebridge check` on the example config: valid, and it creates no store.
    (said,) = [out for command, out in outputs if command.startswith("sebridge check")]
    assert "sebridge.toml: valid" in said
    assert store.exists() == store_was_there
    if not store_was_there:
        assert f"ok: store: {store} does not exist yet" in said

    unit = root / "etc" / "systemd" / "system" / "sebridge.service"
    shipped = (ROOT / "deploy" / "systemd" / "sebridge.service").read_text(encoding="utf-8")
    assert unit.read_text(encoding="utf-8") == shipped
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed: the unit was installed, not verified")
    # The unit as shipped names /opt/sebridge/bin/sebridge: point it at this venv.
    verified = tmp_path / "verify" / "sebridge.service"
    verified.parent.mkdir()
    verified.write_text(shipped.replace("/opt/sebridge/", f"{venv}/"), encoding="utf-8")
    done = subprocess.run(
        [analyze, "verify", str(verified)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "sebridge.service" not in done.stderr, done.stderr  # no warning about the unit
