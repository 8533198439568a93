"""Every numeric config key has bounds, and the code works at each bound (issue 10, item 3).

A value `check` accepts must not crash `run`: huge numbers used to pass
validation and then overflow a timedelta, a socket timeout or a wait.
"""

from __future__ import annotations

import signal
import typing
from collections.abc import Iterator
from dataclasses import Field, fields
from pathlib import Path
from typing import Any

import pytest

from helpers import DaemonProcess, run_cli, wait_line
from sebridge.config.loader import Config
from sebridge.imds.simulator import Simulator


def numeric_keys() -> Iterator[tuple[str, Field[Any]]]:
    """(section, field) of every int or float key, core and integration sections alike."""
    default = Config()
    sections = [(f.name, getattr(default, f.name)) for f in fields(Config) if f.name in _CORE]
    for name, section in [*sections, *default.sections.items()]:
        hints = typing.get_type_hints(type(section))
        for f in fields(section):
            if hints[f.name] in (int, float):
                yield name, f


_CORE = ("imds", "store", "policy", "dispatch", "http", "fleet", "templates", "log")
NUMERIC = list(numeric_keys())


def test_there_are_numeric_keys_to_check() -> None:
    assert {f"{s}.{f.name}" for s, f in NUMERIC} >= {
        "imds.poll_interval",
        "imds.timeout",
        "store.retention_days",
        "dispatch.retry_for_seconds_after_gone",
        "dispatch.shutdown_grace_seconds",
    }


@pytest.mark.parametrize(("section", "key"), NUMERIC, ids=[f"{s}.{f.name}" for s, f in NUMERIC])
def test_every_numeric_key_has_an_upper_and_a_lower_bound(section: str, key: Field[Any]) -> None:
    assert key.metadata.get("le") is not None, f"{section}.{key.name} has no upper bound"
    assert (key.metadata.get("ge") is not None) or (key.metadata.get("gt") is not None)


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("store", "retention_days", 100000000000),
        ("dispatch", "retry_for_seconds_after_gone", 9000000000000000000),
        ("dispatch", "shutdown_grace_seconds", 1e308),
        ("imds", "timeout", 1e300),
    ],
)
def test_values_that_crashed_run_are_refused_by_check(
    tmp_path: Path, section: str, key: str, value: float
) -> None:
    cfg = tmp_path / "sebridge.toml"
    store = f'[store]\nurl = "sqlite:///{tmp_path / "state.db"}"\n'
    cfg.write_text(store + f"[{section}]\n{key} = {value!r}\n".replace("[store]\n", ""))
    done = run_cli("check", "--config", str(cfg))
    assert done.returncode == 2, done.stderr
    assert f"{section}.{key}: must be <=" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_daemon_runs_with_every_numeric_key_at_its_maximum(tmp_path: Path) -> None:
    """A real `sebridge run` with every bound at once: the first tick, the scheduler's
    start path (intervals, the prune job's retention), delivery, and a clean stop."""
    maxima: dict[str, list[str]] = {}
    for section, key in NUMERIC:
        maxima.setdefault(section, []).append(f"{key.name} = {key.metadata['le']!r}")
    with Simulator(port=0) as sim:
        event_id = sim.schedule("Reboot")
        cfg = tmp_path / "sebridge.toml"
        lines = [
            "[imds]",
            f'endpoint = "{sim.url}"',
            "[store]",
            f'url = "sqlite:///{tmp_path / "state.db"}"',
            "[jsonl]",
            f'path = "{tmp_path / "events.jsonl"}"',
            "[console]",
            "enabled = false",
        ]
        for section, keys in maxima.items():
            at = lines.index(f"[{section}]") + 1 if f"[{section}]" in lines else len(lines)
            if at == len(lines):
                lines.append(f"[{section}]")
                at += 1
            lines[at:at] = keys
        cfg.write_text("\n".join(lines) + "\n")
        assert run_cli("check", "--config", str(cfg)).returncode == 0
        daemon = DaemonProcess(cfg, tmp_path / "daemon.log")
        try:
            wait_line(tmp_path / "events.jsonl", event_id, "scheduled", timeout=30)
            daemon.signal(signal.SIGTERM)
            assert daemon.wait(60) == 0, daemon.log_text()
        finally:
            daemon.kill()
    assert "Traceback" not in daemon.log_text()


def test_a_misspelt_hooks_section_and_a_huge_port_are_said_as_written(tmp_path: Path) -> None:
    """Issue 34, finding 12: `[hook]` was "did you mean [webhook]?" with [hooks] missing from
    the known sections, and a port was shown as 4.83314e+09."""
    cfg = tmp_path / "sebridge.toml"
    cfg.write_text(
        f'[store]\nurl = "sqlite:///{tmp_path / "state.db"}"\n'
        '[hook.drain]\ncommand = ["/bin/true"]\n'
        '[email]\nhost = "smtp.example.com"\nport = 4833140000\n'
        'from = "sebridge@example.com"\nto = ["ops@example.com"]\n'
    )
    done = run_cli("check", "--config", str(cfg))
    assert done.returncode == 2, done.stderr
    assert "unknown section [hook] (did you mean [hooks]?)" in done.stderr
    assert "known sections: imds, store," in done.stderr and ", hooks" in done.stderr
    assert "email.port: must be <= 65535, got 4833140000" in done.stderr
    assert "e+" not in done.stderr
