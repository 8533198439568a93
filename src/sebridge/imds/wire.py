"""The poll's fast path: one GET on a kept-alive socket, the request sent 86,400 times a day
(and the compute name's GET at a start: a daemon that only polls never loads urllib3).

An idle daemon spent most of its CPU in urllib3 and http.client parsing the
same small response every second. This reads a response with a
Content-Length (status, headers, body) and nothing fancier; for anything
else (chunked encoding, no length, a closed or stale connection) it returns
None and the caller sends that request through urllib3 instead.
"""

from __future__ import annotations

import contextlib
import socket
import struct

__all__ = ["BodyTooLarge", "FastGet", "RawResponse"]

# status, headers (lower-case names), body
RawResponse = tuple[int, dict[str, str], bytes]

_MAX_HEAD = 16 * 1024


class BodyTooLarge(Exception):
    """The answer's Content-Length is over the cap: nothing of its body was read."""

    def __init__(self, length: int) -> None:
        super().__init__(f"{length} bytes")
        self.length = length


class FastGet:
    """GETs one fixed URL over a kept-alive socket; None means "send it through urllib3"."""

    def __init__(self, host: str, port: int, target: str, max_body: int) -> None:
        self._address = (host, port)
        self._max_body = max_body
        self._request = (
            f"GET {target} HTTP/1.1\r\nHost: {host}:{port}\r\nMetadata: true\r\n"
            "Accept: application/json\r\nUser-Agent: sebridge\r\n\r\n"
        ).encode("ascii")
        self._sock: socket.socket | None = None
        self._timeout: float | None = None  # the socket's, as last set
        self._buffer = b""

    def get(self, timeout: float) -> RawResponse | None:
        """The response, or None (and the connection dropped) when it is not a simple one.

        Raises:
            TimeoutError: IMDS did not answer in time (asking again would only wait again).
            BodyTooLarge: the answer says it is longer than `max_body` (not read, dropped).
        """
        try:
            response = self._exchange(timeout)
        except (TimeoutError, BodyTooLarge):
            self.close()
            raise
        except (OSError, ValueError):
            response = None
        if response is None:
            self.close()
        return response

    def abort(self) -> None:
        """End a GET in flight on another thread now: its read sees the connection end.

        Only shuts the socket down; the thread that owns it closes it."""
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):  # not connected (yet, or any more)
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """Drop the connection."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._buffer = b""

    def _exchange(self, timeout: float) -> RawResponse | None:
        sock = self._sock
        if sock is None:
            sock = self._sock = socket.create_connection(self._address, timeout=timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # A blocking socket, its timeouts kept by the kernel: with a Python timeout each
            # send and receive is first a poll() (and each settimeout() an ioctl()), three
            # system calls more per GET. A receive that times out fails with EAGAIN (_fill).
            sock.settimeout(None)
            self._timeout = None
        if timeout != self._timeout:
            timeval = _timeval(timeout)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)
            self._timeout = timeout
        try:
            sock.sendall(self._request)  # one send(): the request is 150 bytes
        except BlockingIOError:  # SO_SNDTIMEO passed
            raise TimeoutError from None
        head = self._read_until(b"\r\n\r\n")
        if head is None:
            return None
        status_line, _, header_text = head.partition(b"\r\n")
        parts = status_line.split(b" ", 2)
        if len(parts) < 2 or parts[0] != b"HTTP/1.1" or not parts[1].isdigit():
            return None
        headers = _headers(header_text)
        if "transfer-encoding" in headers:
            return None
        length = int(headers.get("content-length", "-1"))
        if length > self._max_body:
            raise BodyTooLarge(length)
        if length < 0:
            return None
        body = self._read_exactly(length)
        if body is None:
            return None
        if headers.get("connection", "").lower() == "close":
            self.close()
        return int(parts[1]), headers, body

    def _read_until(self, marker: bytes) -> bytes | None:
        while marker not in self._buffer:
            if len(self._buffer) > _MAX_HEAD or not self._fill():
                return None
        head, _, self._buffer = self._buffer.partition(marker)
        return head

    def _read_exactly(self, length: int) -> bytes | None:
        while len(self._buffer) < length:
            if not self._fill():
                return None
        body, self._buffer = self._buffer[:length], self._buffer[length:]
        return body

    def _fill(self) -> bool:
        assert self._sock is not None
        try:
            chunk = self._sock.recv(65536)
        except BlockingIOError:  # SO_RCVTIMEO passed with nothing received
            raise TimeoutError from None
        self._buffer += chunk
        return bool(chunk)


def _timeval(seconds: float) -> bytes:
    """`seconds` as SO_RCVTIMEO/SO_SNDTIMEO's struct timeval; at least a microsecond (a
    zero timeval means no timeout at all)."""
    micros = max(1, round(seconds * 1_000_000))
    return struct.pack("@ll", micros // 1_000_000, micros % 1_000_000)


def _headers(text: bytes) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in text.decode("latin-1").split("\r\n"):
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return headers
