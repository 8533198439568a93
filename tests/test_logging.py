"""`[log] format = "json"`: every line the daemon writes to stderr is one JSON object."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from fakes.imds_fixture import FixtureImds
from helpers import run_cli, write_config
from sebridge.cli.runtime import configure_logging
from sebridge.integrations.registry import config_from_mapping as from_mapping


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_json_logs_of_a_real_command_parse_line_by_line(tmp_path: Path) -> None:
    # Events is a string: the poll's warning quotes it ("x\"y") and holds a newline.
    with FixtureImds({"DocumentIncarnation": 1, "Events": 'x"y\nz'}) as imds:
        cfg = write_config(
            tmp_path / "sebridge.toml",
            endpoint=imds.url,
            db=tmp_path / "state.db",
            extra='[log]\nformat = "json"\n',
        )
        # --json: the command's own answer goes to stdout; stderr holds only logs.
        done = run_cli("once", "-v", "--json", "--config", str(cfg))
    assert json.loads(done.stdout)["polled"] is False
    records = [json.loads(line) for line in done.stderr.splitlines()]
    assert len(records) >= 2, done.stderr  # debug lines and the warning
    warning = next(r for r in records if r["level"] == "WARNING")
    assert warning["logger"] == "sebridge.daemon"
    assert 'Events is str "x\\"y\\nz"' in warning["msg"]
    assert all({"ts", "level", "logger", "msg"} <= r.keys() for r in records)


def test_a_traceback_is_a_field_of_its_record(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(from_mapping({"log": {"format": "json"}}))
    try:
        raise ValueError('bad "value"\nsecond line')
    except ValueError:
        logging.getLogger("sebridge.test").exception("tick failed; polling goes on")
    (line,) = capsys.readouterr().err.splitlines()
    record = json.loads(line)
    assert record["msg"] == "tick failed; polling goes on"
    assert record["exception"].startswith("Traceback (most recent call last):")
    assert 'ValueError: bad "value"\nsecond line' in record["exception"]
