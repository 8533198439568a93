"""How long a receiver that drips its answer holds each sink (issue 37, item 5).

For Teams (both formats), Slack (Web API, over TLS), Jira and Kubernetes: a receiver
on 127.0.0.1 takes each request whole, then drips a valid HTTP answer (200, a small
JSON body: about 80 bytes) one byte every `--every` seconds; the sink's `timeout` is
`--timeout`. Printed: the seconds from `send()` to its return or error, and what it
said. The sinks run side by side, each against its own receiver, so the run takes as
long as the longest hold. Run it against another tree (the code before the fix) with
PYTHONPATH=THAT/src: it prints which sebridge it imported.

    python bench/sink_drip.py                     # 1 byte / 1.5 s, timeout 2 s
    python bench/sink_drip.py --every 0.5 --timeout 1

Exit status 0 whatever the figures; 1 only if a measurement could not be taken.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sebridge
from harness import PROXY_VARS
from sebridge.config.secrets import Secret
from sebridge.integrations.jira.client import JiraApi
from sebridge.integrations.jira.settings import JiraSettings
from sebridge.integrations.jira.sink import JiraSink
from sebridge.integrations.kubernetes.client import KubeApi
from sebridge.integrations.kubernetes.sink import KubernetesSink
from sebridge.integrations.render import Renderer
from sebridge.integrations.slack.sink import SlackSink, build_slack_client
from sebridge.integrations.teams.sink import TeamsSink
from sebridge.model import ScheduledEvent, Transition, TransitionKind
from sebridge.model.message import Message


class Dripper:
    """Takes each request, then drips `answer` one byte every `every` s (TLS if given)."""

    def __init__(self, every: float, tls: ssl.SSLContext | None = None) -> None:
        body = json.dumps({"ok": True, "channel": "C0123456789", "ts": "1.2"}).encode()
        self.answer = (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        self.every, self.tls = every, tls
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.listener.getsockname()[1]}"
        self.stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            sock = self.tls.wrap_socket(conn, server_side=True) if self.tls else conn
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                data += chunk
            for byte in self.answer:
                if self.stop.wait(self.every):
                    return
                sock.sendall(bytes([byte]))

    def close(self) -> None:
        self.stop.set()
        self.listener.close()


@contextlib.contextmanager
def certificate() -> Iterator[tuple[Path, ssl.SSLContext]]:
    """A CA file and a server context for 127.0.0.1 (made by the openssl CLI)."""
    with tempfile.TemporaryDirectory() as folder:
        d = Path(folder)
        (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")

        def run(*args: str) -> None:
            subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=d)

        run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.crt", "-days", "1", "-subj", "/CN=bench-ca")  # fmt: skip
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "s.key", "-out", "s.csr",
            "-subj", "/CN=127.0.0.1")  # fmt: skip
        run("x509", "-req", "-in", "s.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "s.crt", "-days", "1", "-extfile", "ext.cnf")  # fmt: skip
        server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server.load_cert_chain(d / "s.crt", d / "s.key")
        yield d / "ca.crt", server


def message() -> Message:
    now = datetime.now(UTC)
    event = ScheduledEvent(
        "6CB0F9E2-1D6C-4B4E-9C63-2A1F2E1B0C01", "Reboot", "Scheduled",
        ("aks-nodepool1-12345678-vmss_3",), not_before=now + timedelta(minutes=15),
    )  # fmt: skip
    return Message(Transition(TransitionKind.SCHEDULED, event, now), "vm", "ask", transition_id=1)


def measure(name: str, send: Callable[[], object], results: dict[str, tuple[float, str]]) -> None:
    began = time.monotonic()
    try:
        send()
        said = "delivered"
    except Exception as exc:  # what the sink said is the figure, whatever it is
        said = f"{type(exc).__name__}: {exc}"
    results[name] = (time.monotonic() - began, said)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=float, default=1.5, help="seconds between bytes")
    parser.add_argument("--timeout", type=int, default=2, help="each sink's timeout, seconds")
    args = parser.parse_args()
    for name in PROXY_VARS:
        os.environ.pop(name, None)
    print(f"sebridge from {Path(sebridge.__file__).parent}")
    print(
        f"a dripping receiver: 1 byte every {args.every:g} s; each sink's timeout {args.timeout} s"
    )
    results: dict[str, tuple[float, str]] = {}
    drippers: list[Dripper] = []
    with certificate() as (ca, server_tls), tempfile.TemporaryDirectory() as folder:
        os.environ["SSL_CERT_FILE"] = str(ca)  # the Slack client trusts the bench's CA
        token = Path(folder) / "token"
        token.write_text("a-token\n")

        def dripper(tls: ssl.SSLContext | None = None) -> str:
            drippers.append(Dripper(args.every, tls))
            return drippers[-1].url

        t = args.timeout
        sinks: dict[str, Callable[[], object]] = {}
        for fmt in ("adaptive", "messagecard"):
            teams = TeamsSink(dripper() + "/workflows", Renderer(), format=fmt, timeout=t)
            sinks[f"teams ({fmt})"] = lambda teams=teams: teams.send(message())
        slack_client = build_slack_client("xoxb-a-token", dripper(server_tls) + "/api/")
        slack_client.timeout = t
        slack = SlackSink(slack_client, "C0123456789", Renderer())
        sinks["slack"] = lambda: slack.send(message())
        settings = JiraSettings(url=dripper(), project="OPS", pat=Secret("a-pat"))
        jira = JiraSink(JiraApi(settings, timeout=(5.0, float(t))), Renderer())
        sinks["jira"] = lambda: jira.send(message())
        kube = KubernetesSink(KubeApi(dripper(server_tls), str(token), str(ca), timeout=t))
        sinks["kubernetes"] = lambda: kube.send(message())
        threads = [
            threading.Thread(target=measure, args=(name, send, results), daemon=True)
            for name, send in sinks.items()
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for each in drippers:
            each.close()
    print(f"{'sink':<22} {'held':>8}  said")
    for name in sinks:
        if name not in results:
            print(f"{name:<22} {'-':>8}  no figure", file=sys.stderr)
            return 1
        seconds, said = results[name]
        print(f"{name:<22} {seconds:>7.2f}s  {said[:150]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
