"""One hook run as a real process: environment, stdin, exit codes, timeouts, leftovers."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from helpers import process_alive
from sebridge.hooks.process import ENV_VALUE_LIMIT, OUTPUT_LIMIT, HookSpec, run_hook
from sebridge.imds import parse_document
from sebridge.kernel.redact import Masker
from sebridge.model import ScheduledEvent

EVENT = ScheduledEvent(
    event_id="E-HOOK-1",
    event_type="Reboot",
    status="Scheduled",
    resources=("vm1", "vm2"),
    resource_type="VirtualMachine",
    not_before=datetime(2026, 11, 25, 4, 30, tzinfo=UTC),
    not_before_text="Wed, 25 Nov 2026 04:30:00 GMT",
    description="Host maintenance",
    source="Platform",
    duration_seconds=-1,
)


def script(tmp_path: Path, name: str, body: str) -> tuple[str, ...]:
    path = tmp_path / f"{name}.py"
    path.write_text(body)
    return (sys.executable, str(path))


def seen_script(tmp_path: Path, out: Path) -> tuple[str, ...]:
    """A hook that writes its SEBRIDGE_* environment and its stdin to `out` as JSON."""
    return script(
        tmp_path,
        "seen",
        "import json, os, sys\n"
        f"env = {{k: v for k, v in os.environ.items() if k.startswith('SEBRIDGE_')}}\n"
        f"json.dump({{'env': env, 'stdin': json.load(sys.stdin)}}, open({str(out)!r}, 'w'))\n",
    )


def test_a_hook_gets_the_event_in_its_environment_and_on_stdin(tmp_path: Path) -> None:
    out = tmp_path / "seen.json"
    command = seen_script(tmp_path, out)
    outcome = run_hook(HookSpec("drain", command), EVENT, stage="prepare", vm_name="vm1")
    assert outcome.succeeded and outcome.exit_code == 0
    seen = json.loads(out.read_text())
    assert seen["env"] == {
        "SEBRIDGE_EVENT_ID": "E-HOOK-1",
        "SEBRIDGE_EVENT_TYPE": "Reboot",
        "SEBRIDGE_EVENT_SOURCE": "Platform",
        "SEBRIDGE_NOT_BEFORE": "2026-11-25T04:30:00Z",
        "SEBRIDGE_DURATION_SECONDS": "-1",
        "SEBRIDGE_RESOURCES": "vm1,vm2",
        "SEBRIDGE_VM_NAME": "vm1",
        "SEBRIDGE_HOOK": "drain",
        "SEBRIDGE_STAGE": "prepare",
    }
    assert seen["stdin"] == {
        "EventId": "E-HOOK-1",
        "EventType": "Reboot",
        "ResourceType": "VirtualMachine",
        "Resources": ["vm1", "vm2"],
        "EventStatus": "Scheduled",
        "NotBefore": "Wed, 25 Nov 2026 04:30:00 GMT",
        "Description": "Host maintenance",
        "EventSource": "Platform",
        "DurationInSeconds": -1,
    }


def test_the_argv_is_not_given_to_a_shell(tmp_path: Path) -> None:
    marker = tmp_path / "not-created"
    command = (sys.executable, "-c", "import sys; print(sys.argv[1])", f"x; touch {marker}")
    outcome = run_hook(HookSpec("echo", command), EVENT, stage="prepare", vm_name="vm1")
    assert outcome.succeeded
    assert outcome.output == f"x; touch {marker}\n"
    assert not marker.exists()


def test_a_failing_hook_reports_its_exit_code_and_the_tail_of_its_output(tmp_path: Path) -> None:
    command = script(
        tmp_path,
        "fail",
        "import sys\nprint('draining web1')\nprint('lb refused: 503', file=sys.stderr)\nsys.exit(3)\n",
    )
    outcome = run_hook(HookSpec("drain", command), EVENT, stage="prepare", vm_name="vm1")
    assert not outcome.succeeded and not outcome.timed_out
    assert outcome.exit_code == 3
    assert outcome.why() == "exit 3"
    assert "draining web1" in outcome.output and "lb refused: 503" in outcome.output


def test_output_is_kept_bounded_to_its_tail(tmp_path: Path) -> None:
    command = script(
        tmp_path,
        "loud",
        "import sys\nsys.stdout.write('x' * 1_000_000)\nsys.stdout.write('THE END')\n",
    )
    outcome = run_hook(HookSpec("loud", command), EVENT, stage="prepare", vm_name="vm1")
    assert outcome.succeeded
    assert len(outcome.output) == OUTPUT_LIMIT
    assert outcome.output.endswith("THE END")


def test_a_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    command = script(
        tmp_path,
        "hang",
        "import os, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
        "print('waiting for the load balancer', flush=True)\n"
        "time.sleep(600)\n",
    )
    began = time.monotonic()
    outcome = run_hook(
        HookSpec("drain", command, timeout=1.0), EVENT, stage="prepare", vm_name="vm1"
    )
    took = time.monotonic() - began
    assert outcome.timed_out and not outcome.succeeded and outcome.exit_code is None
    assert outcome.why() == "timed out after 1 s"
    assert "waiting for the load balancer" in outcome.output
    assert took < 30  # bounded: the hook would have slept 600 s
    hook_pid, child_pid = (int(p) for p in pids.read_text().split())
    deadline = time.monotonic() + 5
    while (process_alive(hook_pid) or process_alive(child_pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_alive(hook_pid) and not process_alive(child_pid)


@pytest.mark.slow
def test_a_hook_that_ignores_sigterm_is_killed(tmp_path: Path) -> None:
    command = script(
        tmp_path,
        "stubborn",
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('up', flush=True)\n"
        "time.sleep(600)\n",
    )
    outcome = run_hook(HookSpec("s", command, timeout=0.5), EVENT, stage="prepare", vm_name="vm1")
    assert outcome.timed_out and "up" in outcome.output


def test_children_left_behind_do_not_hold_the_hook_open_and_are_ended(tmp_path: Path) -> None:
    pid_file = tmp_path / "child"
    command = script(
        tmp_path,
        "leaves",
        "import subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "print('drained')\n",
    )
    began = time.monotonic()
    outcome = run_hook(HookSpec("drain", command), EVENT, stage="prepare", vm_name="vm1")
    assert outcome.succeeded and outcome.output == "drained\n"
    assert time.monotonic() - began < 30  # the child (600 s) holds our pipe: not waited for
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while process_alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_alive(child)


@pytest.mark.parametrize("command", [("/nonexistent/drain",), ("/etc/hostname",)])
def test_a_command_that_cannot_start_is_a_failure_that_says_why(command: tuple[str, ...]) -> None:
    outcome = run_hook(HookSpec("drain", command), EVENT, stage="prepare", vm_name="vm1")
    assert not outcome.succeeded and outcome.exit_code is None
    assert outcome.why().startswith(f"could not start {command[0]!r}")


def test_output_that_is_not_utf8_is_kept_readable(tmp_path: Path) -> None:
    command = script(tmp_path, "bytes", "import sys\nsys.stdout.buffer.write(b'bad \\xff byte')\n")
    outcome = run_hook(HookSpec("b", command), EVENT, stage="recover", vm_name="vm1")
    assert outcome.succeeded and outcome.output == "bad \ufffd byte"


def test_an_event_read_from_hostile_text_still_runs_its_hook(tmp_path: Path) -> None:
    """NUL and lone surrogates cannot be in an environment: parse reads them as U+FFFD."""
    hostile = {
        "EventId": "E-HOOK-2",
        "EventType": "Reb\ud800oot",
        "EventStatus": "Scheduled",
        "EventSource": "Plat\x00form",
        "Resources": ["vm1", "v\udc80m2"],
        "Description": "kept \x00 \ud800",
    }
    (event,) = parse_document(json.dumps({"DocumentIncarnation": 1, "Events": [hostile]})).events
    out = tmp_path / "seen.json"
    command = seen_script(tmp_path, out)
    outcome = run_hook(HookSpec("drain", command), event, stage="prepare", vm_name="vm1")
    assert outcome.succeeded, outcome
    seen = json.loads(out.read_text())
    assert seen["env"]["SEBRIDGE_EVENT_TYPE"] == "Reb\ufffdoot"
    assert seen["env"]["SEBRIDGE_EVENT_SOURCE"] == "Plat\ufffdform"
    assert seen["env"]["SEBRIDGE_RESOURCES"] == "vm1,v\ufffdm2"
    assert seen["stdin"]["Description"] == "kept \x00 \ud800"


# An event whose Description alone is over three times a pipe's 64 KiB.
BIG = replace(EVENT, description="d" * 200_000)


def test_the_timeout_covers_writing_a_big_event_to_a_hook_that_never_reads_it(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "pid"
    command = script(
        tmp_path,
        "deaf",
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n",
    )
    outcome = run_hook(HookSpec("drain", command, timeout=1.0), BIG, stage="prepare", vm_name="vm1")
    assert outcome.timed_out and not outcome.succeeded and outcome.exit_code is None
    assert outcome.why() == "timed out after 1 s"
    hook = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while process_alive(hook) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_alive(hook)  # its process group is gone


def test_a_hook_that_exits_without_reading_a_big_event_succeeded(tmp_path: Path) -> None:
    command = script(tmp_path, "quick", "print('drained')\n")
    outcome = run_hook(HookSpec("drain", command, timeout=30), BIG, stage="prepare", vm_name="vm1")
    assert outcome.succeeded and outcome.exit_code == 0 and outcome.output == "drained\n"


def test_a_hook_that_reads_a_big_event_gets_all_of_it(tmp_path: Path) -> None:
    out = tmp_path / "seen.json"
    outcome = run_hook(
        HookSpec("drain", seen_script(tmp_path, out)), BIG, stage="prepare", vm_name="vm1"
    )
    assert outcome.succeeded
    assert json.loads(out.read_text())["stdin"]["Description"] == "d" * 200_000


def env_script(tmp_path: Path, out: Path) -> tuple[str, ...]:
    """A hook that writes its whole environment to `out` as JSON."""
    return script(
        tmp_path, "env", f"import json, os\njson.dump(dict(os.environ), open({str(out)!r}, 'w'))\n"
    )


def test_a_hook_gets_a_clean_environment_with_what_its_config_names(tmp_path: Path) -> None:
    out = tmp_path / "env.json"
    daemon = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/var/lib/sebridge",
        "LANG": "C.UTF-8",
        "SLACK_BOT_TOKEN": "xoxb-never-passed",
        "PGPASSWORD": "never-passed",
        "KUBECONFIG": "/etc/kube/config",
        "SEBRIDGE_CONFIG": "/etc/sebridge/sebridge.toml",
    }
    spec = HookSpec(
        "drain",
        env_script(tmp_path, out),
        env={"POOL": "web", "PATH": "/opt/drain/bin:/usr/bin"},
        inherit_env=("KUBECONFIG", "HTTPS_PROXY"),  # HTTPS_PROXY unset: not passed
    )
    outcome = run_hook(spec, EVENT, stage="prepare", vm_name="vm1", base_env=daemon)
    assert outcome.succeeded, outcome
    seen = json.loads(out.read_text())
    seen.pop("LC_CTYPE", None)  # Python's own locale coercion in the hook, not ours
    assert {k: v for k, v in seen.items() if not k.startswith("SEBRIDGE_")} == {
        "PATH": "/opt/drain/bin:/usr/bin",  # env wins over the daemon's
        "HOME": "/var/lib/sebridge",
        "LANG": "C.UTF-8",
        "KUBECONFIG": "/etc/kube/config",
        "POOL": "web",
    }
    assert sorted(k for k in seen if k.startswith("SEBRIDGE_")) == [
        "SEBRIDGE_DURATION_SECONDS",
        "SEBRIDGE_EVENT_ID",
        "SEBRIDGE_EVENT_SOURCE",
        "SEBRIDGE_EVENT_TYPE",
        "SEBRIDGE_HOOK",
        "SEBRIDGE_NOT_BEFORE",
        "SEBRIDGE_RESOURCES",
        "SEBRIDGE_STAGE",
        "SEBRIDGE_VM_NAME",
    ]


def test_a_daemon_without_path_gives_its_hooks_the_usual_one(tmp_path: Path) -> None:
    out = tmp_path / "env.json"
    outcome = run_hook(
        HookSpec("drain", env_script(tmp_path, out)),
        EVENT,
        stage="prepare",
        vm_name="vm1",
        base_env={},
    )
    assert outcome.succeeded
    seen = json.loads(out.read_text())
    assert seen["PATH"] == "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    assert "HOME" not in seen


# Resources over 128 KiB: in the environment, every hook failed ("Argument list too long").
MANY = replace(
    EVENT, event_id="E-" + "9" * 40_000, resources=tuple(f"vm{n:05}" for n in range(20_000))
)


def test_long_values_come_in_files_and_the_whole_event_on_stdin(tmp_path: Path) -> None:
    out = tmp_path / "seen.json"
    command = script(
        tmp_path,
        "files",
        "import json, os, sys\n"
        "env = dict(os.environ)\n"
        "files = {k: open(v).read() for k, v in env.items() if k.endswith('_FILE')}\n"
        "paths = {k: v for k, v in env.items() if k.endswith('_FILE')}\n"
        "modes = {k: oct(os.stat(os.path.dirname(v)).st_mode & 0o777) for k, v in paths.items()}\n"
        f"json.dump({{'env': env, 'files': files, 'paths': paths, 'modes': modes,"
        f" 'stdin': json.load(sys.stdin)}}, open({str(out)!r}, 'w'))\n",
    )
    outcome = run_hook(HookSpec("drain", command), MANY, stage="prepare", vm_name="vm1")
    assert outcome.succeeded, outcome
    seen = json.loads(out.read_text())
    assert "SEBRIDGE_RESOURCES" not in seen["env"] and "SEBRIDGE_EVENT_ID" not in seen["env"]
    assert seen["files"] == {
        "SEBRIDGE_RESOURCES_FILE": ",".join(MANY.resources),
        "SEBRIDGE_EVENT_ID_FILE": MANY.event_id,
    }
    assert seen["modes"] == {k: "0o700" for k in seen["files"]}  # only ours to read
    assert seen["env"]["SEBRIDGE_EVENT_TYPE"] == "Reboot"  # short ones stay as they are
    assert seen["stdin"]["Resources"] == list(MANY.resources)
    assert seen["stdin"]["EventId"] == MANY.event_id
    assert not any(Path(p).exists() for p in seen["paths"].values())  # removed after the run


def test_a_value_at_the_limit_stays_in_the_environment(tmp_path: Path) -> None:
    out = tmp_path / "seen.json"
    event = replace(EVENT, resources=("v" * ENV_VALUE_LIMIT,))
    outcome = run_hook(
        HookSpec("drain", seen_script(tmp_path, out)), event, stage="prepare", vm_name="vm1"
    )
    assert outcome.succeeded
    assert json.loads(out.read_text())["env"]["SEBRIDGE_RESOURCES"] == "v" * ENV_VALUE_LIMIT


SECRET = "xoxb-4242-0123456789abcdef"


def test_secrets_in_a_hooks_output_are_masked(tmp_path: Path) -> None:
    command = script(
        tmp_path, "loud", f"print('token={SECRET}; pw=hunter22'); raise SystemExit(1)\n"
    )
    outcome = run_hook(
        HookSpec("drain", command),
        EVENT,
        stage="prepare",
        vm_name="vm1",
        mask=Masker([SECRET, "hunter22"]),
    )
    assert outcome.exit_code == 1 and outcome.output == "token=***; pw=***\n"


@pytest.mark.parametrize("before", [-30, -20, -1, 0, 1, 13, 25, 26, 27, 40])
def test_a_secret_the_tails_cut_goes_through_leaves_nothing_behind(
    tmp_path: Path, before: int
) -> None:
    """The output is longer than the tail kept; the secret begins `before` bytes before the
    last OUTPUT_LIMIT (0 or less: it ends before them, or is cut where they begin)."""
    tail = "t" * (OUTPUT_LIMIT - before)
    command = script(
        tmp_path, "long", f"import sys\nsys.stdout.write('h' * 50000 + {SECRET!r} + {tail!r})\n"
    )
    outcome = run_hook(
        HookSpec("s", command), EVENT, stage="prepare", vm_name="vm1", mask=Masker([SECRET])
    )
    assert outcome.succeeded
    if before <= 0:  # before them, or the cut went through it: none of its end is left
        assert outcome.output == tail[-OUTPUT_LIMIT:]
    else:  # whole in what is kept: masked, whether the margin holds part of it or not
        assert outcome.output == "h" * max(0, before - len(SECRET)) + "***" + tail


def test_a_long_value_that_cannot_be_written_fails_the_run_saying_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "no-such-folder"))
    outcome = run_hook(HookSpec("drain", ("true",)), MANY, stage="prepare", vm_name="vm1")
    assert not outcome.succeeded and outcome.exit_code is None
    assert outcome.why().startswith("could not write its long SEBRIDGE_* values to a file: ")
