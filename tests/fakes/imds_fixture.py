"""A stand-in IMDS that serves one fixed Scheduled Events body: other projects' fixtures.

The simulator only ever writes documents the way Microsoft documents them;
peers' test fixtures send other shapes (a DocumentIncarnation "abc123", a
NotBefore "20170702"). This server answers GET /metadata/scheduledevents with
whatever body the test set, /metadata/instance/compute with the VM's name,
and a StartRequests POST with 200, like IMDS, over a real socket.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FixtureImds"]


class FixtureImds:
    """IMDS answering a fixed body; `body` may be replaced while it runs."""

    def __init__(
        self, body: bytes | dict[str, Any], vm_name: str = "vm0", *, hang_compute: bool = False
    ) -> None:
        """hang_compute: hold /metadata/instance/compute requests until the server stops."""
        self.body = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.vm_name = vm_name
        self.posts: list[bytes] = []
        self.hanging = threading.Event()  # set once a request is being held
        self._released = threading.Event()
        self._hang_compute = hang_compute
        fixture = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.startswith("/metadata/instance/compute"):
                    if fixture._hang_compute:
                        fixture.hanging.set()
                        fixture._released.wait()
                        return
                    self._answer(json.dumps({"name": fixture.vm_name}).encode())
                elif self.path.startswith("/metadata/scheduledevents"):
                    self._answer(fixture.body)
                else:
                    self.send_error(404)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                fixture.posts.append(self.rfile.read(length))
                self._answer(b"")

            def _answer(self, body: bytes) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """http://127.0.0.1:PORT"""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FixtureImds:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._released.set()
        self._server.shutdown()
        self._server.server_close()
