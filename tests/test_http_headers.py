"""Security headers on every answer of the HTTP server: routes', the core's (/healthz,
404, 405, 500) and the ones waitress writes itself (400, 413, 431, its own 500)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from sebridge.web.headers import SECURITY_HEADERS
from sebridge.web.server import HttpServer

PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'"


def plain(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    start_response("200 OK", [("Content-Length", "2")])
    return [b"ok"]


def own_policy(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    start_response(
        "200 OK",
        [
            ("Content-Length", "2"),
            ("Content-Security-Policy", PAGE_CSP),
            ("cache-control", "max-age=5"),
        ],
    )
    return [b"ok"]


def broken(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    raise RuntimeError("a bug in a route")


def broken_later(environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
    """Fails while waitress iterates the body, before anything was sent: waitress's own 500."""
    raise RuntimeError("a bug found while answering")
    yield b""  # a generator: the raise happens inside waitress


@pytest.fixture
def server() -> Iterator[HttpServer]:
    srv = HttpServer(
        "127.0.0.1",
        0,
        {"/plain": plain, "/own": own_policy, "/broken": broken, "/later": broken_later},
        lambda: (503, {"status": "failing"}),
    )
    srv.start()
    yield srv
    srv.stop()


def answer(server: HttpServer, data: bytes) -> tuple[int, list[tuple[str, str]]]:
    """Send raw bytes; the status and headers of the answer."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        with contextlib.suppress(OSError):  # the server may answer and close before taking all
            sock.sendall(data)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(65536)
            if not chunk:
                break
            head += chunk
    lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    headers = [tuple(part.strip() for part in line.split(":", 1)) for line in lines[1:]]
    return int(lines[0].split()[1]), [(k, v) for k, v in headers]


def get(path: str, method: str = "GET") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()


CASES = [
    ("healthz", get("/healthz"), 503),
    ("healthz HEAD", get("/healthz", "HEAD"), 503),
    ("healthz POST", get("/healthz", "POST"), 405),
    ("unknown path", get("/nothing"), 404),
    ("a route", get("/plain"), 200),
    ("a route's bug", get("/broken"), 500),
    ("waitress: a bug while answering", get("/later"), 500),
    (
        "waitress: bad Content-Length",
        b"GET /plain HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n",
        400,
    ),
    ("waitress: bad request line", b"GET /plain HTTP/9.9 nonsense\r\nHost: x\r\n\r\n", 400),
    (
        "waitress: body over the cap",
        b"POST /plain HTTP/1.1\r\nHost: x\r\nContent-Length: 268435456\r\n\r\n",
        413,
    ),
    (
        "waitress: headers over its limit",
        b"GET /plain HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 300_000 + b"\r\n\r\n",
        431,
    ),
]


@pytest.mark.parametrize(("what", "data", "status"), CASES, ids=[c[0] for c in CASES])
def test_every_answer_carries_the_security_headers(
    server: HttpServer, what: str, data: bytes, status: int
) -> None:
    got, headers = answer(server, data)
    assert got == status
    names = [name.lower() for name, _ in headers]
    for name, value in SECURITY_HEADERS:
        assert names.count(name.lower()) == 1, f"{what}: {name}"
        assert (name, value) in headers, f"{what}: {name}"


def test_a_route_keeps_the_headers_it_set_itself(server: HttpServer) -> None:
    status, headers = answer(server, get("/own"))
    assert status == 200
    csp = [v for k, v in headers if k.lower() == "content-security-policy"]
    assert csp == [PAGE_CSP]
    assert [v for k, v in headers if k.lower() == "cache-control"] == ["max-age=5"]
    assert ("X-Frame-Options", "DENY") in headers
