"""A receiver on 127.0.0.1 that takes each request whole, then drips a valid HTTP answer one
byte every `every` seconds: each byte comes well within a read timeout, the whole answer not
for a long while (issue 37, item 5). Over TLS when given a certificate and its key."""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
from pathlib import Path
from typing import Any

__all__ = ["DrippingHttp"]


class DrippingHttp:
    """`with DrippingHttp(every=0.5) as server:` ... `server.url`; `taken`: requests read."""

    def __init__(
        self,
        every: float = 0.5,
        body: Any = None,
        *,
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        text = json.dumps({"ok": True} if body is None else body).encode()
        self.answer = (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(text)}\r\n\r\n".encode()
            + text
        )
        self.every = every
        self.taken: list[bytes] = []
        self._tls: ssl.SSLContext | None = None
        if tls is not None:
            self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._tls.load_cert_chain(*tls)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)  # so that accepting notices the stop
        self.port = self._listener.getsockname()[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]

    @property
    def seconds(self) -> float:
        """How long the whole answer takes to drip."""
        return len(self.answer) * self.every

    def __enter__(self) -> DrippingHttp:
        self._threads[0].start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._listener.close()
        for thread in list(self._threads):
            thread.join(5)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            sock = self._tls.wrap_socket(conn, server_side=True) if self._tls else conn
            request = _read_request(sock)
            if not request:
                return
            self.taken.append(request)
            for byte in self.answer:
                if self._stop.wait(self.every):
                    return
                sock.sendall(bytes([byte]))


def _read_request(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return b""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body
