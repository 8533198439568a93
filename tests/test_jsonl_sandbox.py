"""A JSON lines path the service cannot write is said before it matters (issue 24, item 3):
`check` names a missing folder (the daemon creates files, never folders) and a path the
installed unit's sandbox (ProtectSystem=strict) forbids, with the drop-in line that
allows it; the daemon, whose writes fail with "Read-only file system", logs that fix once."""

from __future__ import annotations

import errno
import logging
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from helpers import toml_str
from sebridge.imds.simulator import Simulator
from sebridge.integrations.jsonl import sandbox, sink
from sebridge.integrations.jsonl.sink import JsonlSink
from sebridge.kernel.errors import RetryableDeliveryError
from sebridge.model import ScheduledEvent, Transition, TransitionKind
from sebridge.model.message import Message
from test_send_test import check, vm7_imds  # noqa: F401 (the fixture `imds`: check asks IMDS)

pytestmark = pytest.mark.usefixtures("hermetic")
SYSTEMD = Path(__file__).resolve().parents[1] / "deploy" / "systemd"


@pytest.fixture
def unit_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shipped unit and its environment drop-in, installed in a folder of the test's."""
    folder = tmp_path / "systemd"
    (folder / "sebridge.service.d").mkdir(parents=True)
    shutil.copy(SYSTEMD / "sebridge.service", folder)
    shutil.copy(SYSTEMD / "sebridge.service.d" / "environment.conf", folder / "sebridge.service.d")
    monkeypatch.setattr(sandbox, "UNIT_DIR", str(folder))
    return folder


def test_a_path_in_a_missing_folder_is_a_problem(tmp_path: Path, imds: Simulator) -> None:
    lines = tmp_path / "nowhere" / "events.jsonl"
    code, out = check(tmp_path, imds, f"[jsonl]\npath = {toml_str(str(lines))}\n")
    assert code == 1, out
    assert (
        f"problem: jsonl.path: the folder {lines.parent} does not exist: the daemon creates "
        f"{lines}, never its folder" in out
    )


def test_a_path_the_units_sandbox_forbids_names_the_drop_in_that_allows_it(
    tmp_path: Path, imds: Simulator, unit_dir: Path
) -> None:
    folder = tmp_path / "shipper"
    folder.mkdir()
    # The test's folder may be under /tmp, which the shipped unit makes private: not here.
    (unit_dir / "sebridge.service.d" / "shared-tmp.conf").write_text(
        "[Service]\nPrivateTmp=no\n", encoding="utf-8"
    )
    lines = folder / "events.jsonl"
    section = f"[jsonl]\npath = {toml_str(str(lines))}\n"
    code, out = check(tmp_path, imds, section)
    assert code == 1, out
    (problem,) = [line for line in out.splitlines() if line.startswith("problem:")]
    assert problem == (
        f"problem: jsonl.path: the unit ({unit_dir}/sebridge.service) has ProtectSystem=strict:"
        f" the service cannot write {lines}; allow it with a drop-in, {unit_dir}/"
        f'sebridge.service.d/jsonl.conf: "[Service]" then "ReadWritePaths={folder}", then'
        " `systemctl daemon-reload` and restart sebridge"
    )
    (unit_dir / "sebridge.service.d" / "jsonl.conf").write_text(
        f"[Service]\nReadWritePaths={folder}\n", encoding="utf-8"
    )
    code, out = check(tmp_path, imds, section)
    assert code == 0, out
    assert "problem:" not in out


def test_the_state_directory_needs_no_drop_in_and_a_private_tmp_is_said(
    tmp_path: Path, unit_dir: Path
) -> None:
    assert sandbox.unit_forbids("/var/lib/sebridge/events.jsonl", str(unit_dir)) is None
    assert sandbox.unit_forbids("/tmp/events.jsonl", str(unit_dir)) == (
        "/tmp/events.jsonl is in the service's private tmp (the unit's PrivateTmp=yes):"
        " the daemon writes it where no other process looks"
    )
    assert sandbox.unit_forbids("/srv/events.jsonl", str(tmp_path / "no-unit")) is None


def message() -> Message:
    event = ScheduledEvent("E1", "Reboot", "Scheduled", ("vm0",), not_before_text="")
    return Message(Transition(TransitionKind.SCHEDULED, event, datetime.now(UTC)), "vm0", "ask")


def test_the_daemon_logs_the_read_only_fix_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The file system is faked here (a write fails as under ProtectSystem=strict): the
    retried error and one log line name the key and the drop-in."""
    lines = tmp_path / "out" / "events.jsonl"

    def read_only(*_args: Any, **_kwargs: Any) -> Any:
        raise OSError(errno.EROFS, "Read-only file system", str(lines))

    monkeypatch.setattr(sink, "open", read_only, raising=False)
    caplog.set_level(logging.ERROR, logger="sebridge")
    jsonl = JsonlSink(str(lines))
    for _ in range(3):
        with pytest.raises(RetryableDeliveryError) as raised:
            jsonl.send(message())
        assert f"ReadWritePaths={lines.parent}" in str(raised.value)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1, said
    assert said[0].startswith(f"jsonl.path: {lines} is on a read-only file system for this service")
    assert f'"ReadWritePaths={lines.parent}"' in said[0]
