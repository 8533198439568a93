"""/healthz latency while 1,000 clients trickle their headers, or say nothing at all.

Two servers, each in its own process, measured in the same run:
- sebridge: the daemon's HTTP server (web/server.py: per-request header and
  body deadlines, and room made at the connection limit: web/deadlines.py);
- baseline: waitress with the settings the daemon had before (idle timeout
  15 s, connection limit 500, which a trickler's bytes keep resetting).

For each, two crowds of `--clients` connections, one after the other: tricklers
(a request line, then one header line every `--every` seconds) and silent ones
(connect, send nothing). A client the server closes connects again at once, as
an attacker would. Meanwhile GET /healthz every 0.25 s on a fresh connection,
timed out after `--timeout` seconds; printed: p50/p99/max and how many went
unanswered, and the baseline's p99 over ours.

    .venv/bin/python bench/http_trickle.py [--clients 1000] [--seconds 40]
"""

from __future__ import annotations

import argparse
import http.client
import resource
import selectors
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SEBRIDGE = """
import sys, threading
from sebridge.web.server import HttpServer
server = HttpServer("127.0.0.1", int(sys.argv[1]), {}, lambda: (200, {"status": "ok"}))
server.start()
threading.Event().wait()
"""

BASELINE = """
import json, sys
from waitress import serve
def app(environ, start_response):
    body = json.dumps({"status": "ok"}).encode()
    start_response("200 OK", [("Content-Type", "application/json"),
                              ("Content-Length", str(len(body)))])
    return [body]
serve(app, host="127.0.0.1", port=int(sys.argv[1]), threads=4, ident="sebridge",
      clear_untrusted_proxy_headers=True, max_request_body_size=1024 * 1024 + 1,
      channel_timeout=15, cleanup_interval=1, connection_limit=500, _quiet=True)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port}")


class Crowd:
    """`count` connections, kept open (reconnecting when closed); tricklers send one
    header line every `every` seconds. One thread, one selector."""

    def __init__(self, port: int, count: int, trickle: bool, every: float) -> None:
        self._port, self._count, self._trickle, self._every = port, count, trickle, every
        self._stop = threading.Event()
        self.reconnects = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Crowd:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _open(self, sel: selectors.BaseSelector, due: dict[socket.socket, float]) -> None:
        sock = socket.socket()
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", self._port))
        sel.register(sock, selectors.EVENT_READ)
        # The request line goes with the first header line; spread over the interval.
        due[sock] = time.monotonic() + (self._every * len(due) / self._count)
        if self._trickle:
            self._send(sock, b"GET /healthz HTTP/1.1\r\n")

    def _send(self, sock: socket.socket, data: bytes) -> bool:
        try:
            sock.send(data)
            return True
        except BlockingIOError:
            return True  # still connecting: the next line goes later
        except OSError:
            return False

    def _run(self) -> None:
        sel = selectors.DefaultSelector()
        due: dict[socket.socket, float] = {}
        for _ in range(self._count):
            self._open(sel, due)
        while not self._stop.is_set():
            closed = []
            for key, _ in sel.select(timeout=0.1):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                try:
                    if sock.recv(4096) == b"":
                        closed.append(sock)
                except BlockingIOError:
                    pass
                except OSError:
                    closed.append(sock)
            now = time.monotonic()
            if self._trickle:
                for sock, at in list(due.items()):
                    if at <= now and sock not in closed:
                        due[sock] = at + self._every
                        if not self._send(sock, b"X-Trickle: 1\r\n"):
                            closed.append(sock)
            for sock in dict.fromkeys(closed):
                sel.unregister(sock)
                due.pop(sock, None)
                sock.close()
                self.reconnects += 1
                self._open(sel, due)
        for sock in due:
            sock.close()
        sel.close()


def probe(port: int, timeout: float) -> float | None:
    start = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", "/healthz")
        response = conn.getresponse()
        response.read()
        return time.monotonic() - start if response.status == 200 else None
    except OSError:
        return None
    finally:
        conn.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(code: str, args: argparse.Namespace, trickle: bool) -> dict[str, float]:
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", code, str(port)], cwd=ROOT)
    try:
        wait_port(port)
        with Crowd(port, args.clients, trickle, args.every) as crowd:
            time.sleep(2.0)  # connected, or queued in the listen backlog
            latencies: list[float] = []
            unanswered = 0
            end = time.monotonic() + args.seconds
            while time.monotonic() < end:
                took = probe(port, args.timeout)
                if took is None:
                    unanswered += 1
                else:
                    latencies.append(took)
                time.sleep(0.25)
            reconnects = crowd.reconnects
    finally:
        server.terminate()
        server.wait(10)
    worst = args.timeout if unanswered else (max(latencies) if latencies else args.timeout)
    return {
        "p50": statistics.median(latencies) if latencies else args.timeout,
        "p99": args.timeout if unanswered > len(latencies) / 100 else percentile(latencies, 0.99),
        "max": worst,
        "probes": len(latencies) + unanswered,
        "unanswered": unanswered,
        "reconnects": reconnects,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--every", type=float, default=5.0, help="seconds between header lines")
    parser.add_argument("--timeout", type=float, default=10.0, help="a probe's timeout")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4 * args.clients)), hard))
    print(
        f"/healthz every 0.25 s for {args.seconds:.0f} s beside {args.clients} connections "
        f"(timeout {args.timeout:.0f} s; unanswered probes count as the timeout)"
    )
    for crowd, trickle in (("trickling", True), ("silent", False)):
        ours = measure(SEBRIDGE, args, trickle)
        base = measure(BASELINE, args, trickle)
        for name, r in (("sebridge", ours), ("baseline (waitress, old settings)", base)):
            print(
                f"  {crowd:9} {name:34} p50 {r['p50'] * 1000:8.1f} ms  p99 "
                f"{r['p99'] * 1000:8.1f} ms  max {r['max'] * 1000:8.1f} ms  unanswered "
                f"{r['unanswered']:.0f}/{r['probes']:.0f}  clients cut off {r['reconnects']:.0f}"
            )
        ratio = base["p99"] / ours["p99"]
        print(f"  {crowd:9} p99 baseline / sebridge: {ratio:.0f}x  (target: ours <= 1 s)")


if __name__ == "__main__":
    main()
