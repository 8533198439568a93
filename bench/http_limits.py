"""What hostile HTTP clients cost the daemon: huge bodies, idle connections.

Two servers, measured in the same run:
- sebridge: a real `sebridge run` in Slack HTTP mode (Slack's Web API points at
  a closed port: deliveries just retry), serving /slack/events and /healthz;
- baseline: waitress with its default settings behind an app that reads the
  body before anything else (what the daemon had before: Bolt reads the body
  before it checks the signature).

For each: peak RSS (VmHWM) before and after four unsigned 256 MiB POSTs to
/slack/events and what each got back, then GET /healthz while N idle
connections are open.

    .venv/bin/python bench/http_limits.py [--mib 256] [--idle 150]
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from sebridge.imds.simulator import Simulator  # noqa: E402

BASELINE = """
import sys
from waitress import serve
def app(environ, start_response):
    if environ["PATH_INFO"] == "/healthz":
        start_response("200 OK", [("Content-Length", "2")]); return [b"ok"]
    body = environ["wsgi.input"].read()  # Bolt's WSGI adapter reads it all first
    start_response("401 Unauthorized", [("Content-Length", "0")]); return []
serve(app, host="127.0.0.1", port=int(sys.argv[1]), _quiet=True)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port}")


def vm_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def big_post(port: int, mib: int) -> tuple[str, float]:
    """POST `mib` MiB of body; returns the status line and the seconds until it came."""
    start = time.monotonic()
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    head = (
        f"POST /slack/events HTTP/1.1\r\nHost: x\r\nContent-Length: {mib << 20}\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\n\r\n"
    ).encode()
    chunk = b"x" * (1 << 20)
    with sock:
        sock.sendall(head)
        try:
            for _ in range(mib):
                sock.sendall(chunk)
        except OSError:
            pass  # closed after its answer: the rest was never read
        answer = sock.recv(4096).split(b"\r\n", 1)[0].decode(errors="replace")
    return answer, time.monotonic() - start


def healthz_with_idle(port: int, idle: int) -> str:
    held = [socket.create_connection(("127.0.0.1", port)) for _ in range(idle)]
    try:
        start = time.monotonic()
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        with sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            try:
                status = sock.recv(4096).split(b"\r\n", 1)[0].decode() or "closed"
            except TimeoutError:
                status = "no answer in 10 s"
        return f"{status} after {(time.monotonic() - start) * 1000:.1f} ms"
    finally:
        for sock in held:
            sock.close()


def measure(name: str, pid: int, port: int, mib: int, idle: int) -> None:
    time.sleep(1.0)
    before = vm_kib(pid, "VmHWM")
    answers = [big_post(port, mib) for _ in range(4)]
    after = vm_kib(pid, "VmHWM")
    print(f"{name}: peak RSS {before / 1024:.1f} MiB -> {after / 1024:.1f} MiB after 4 x {mib} MiB")
    for status, seconds in answers:
        print(f"    {status!r} in {seconds:.2f} s")
    print(f"    GET /healthz with {idle} idle connections: {healthz_with_idle(port, idle)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--idle", type=int, default=150)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, Simulator(port=0, vm_name="vm0") as sim:
        port = free_port()
        config = Path(tmp) / "bench.toml"
        config.write_text(
            f'[imds]\nendpoint = "{sim.url}"\nvm_name = "vm0"\n'
            f'[store]\nurl = "sqlite:///{tmp}/state.db"\n'
            f'[http]\nlisten = "127.0.0.1:{port}"\n'
            "[console]\nenabled = false\n"
            '[slack]\nbot_token = "xoxb-bench"\nsigning_secret = "bench"\nchannel = "C1"\n'
            'api_url = "http://127.0.0.1:9/api/"\n'
        )
        daemon = subprocess.Popen(
            [sys.executable, "-m", "sebridge", "run", "--config", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        base_port = free_port()
        baseline = subprocess.Popen([sys.executable, "-c", BASELINE, str(base_port)])
        try:
            wait_port(port)
            wait_port(base_port)
            measure("sebridge", daemon.pid, port, args.mib, args.idle)
            measure(
                "baseline (waitress defaults, body read first)",
                baseline.pid,
                base_port,
                args.mib,
                args.idle,
            )
        finally:
            for proc in (daemon, baseline):
                proc.terminate()
                proc.wait(30)


if __name__ == "__main__":
    main()
