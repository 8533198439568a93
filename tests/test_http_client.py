"""kernel/http_client.py, sebridge's one HTTP client: proxies and NO_PROXY as the
environment says, our User-Agent, a caller's header in any case replacing ours, bounded
answers, and errors that say what happened without quoting a URL.

A recording receiver on 127.0.0.1 answers every request (a proxy's too: the request line
then carries the absolute URL); the sinks' own behaviour is in their tests.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from helpers import free_port
from sebridge import __version__
from sebridge.kernel.http_client import HttpClient, NoAnswer, TooLarge

pytestmark = pytest.mark.usefixtures("no_proxy")


class Receiver(ThreadingHTTPServer):
    """Answers 200 with `body`; keeps each request's line and headers."""

    daemon_threads = True

    def __init__(self, body: bytes = b"ok") -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.body = body
        self.seen: list[tuple[str, dict[str, str]]] = []
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.seen.append((self.requestline, {k.lower(): v for k, v in self.headers.items()}))
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.server.body)))
        self.end_headers()
        self.wfile.write(self.server.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_proxy_from_the_environment_is_used_with_its_credentials(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", receiver.url.replace("://", "://ops:p%40ss@"))
    client = HttpClient(timeout=5)
    try:
        answer = client.request("POST", "http://hooks.invalid/x?sig=abc", body=b"{}")
    finally:
        client.close()
    assert answer.status == 200 and answer.body == b"ok"
    ((line, headers),) = receiver.seen
    assert line == "POST http://hooks.invalid/x?sig=abc HTTP/1.1"
    assert headers["proxy-authorization"] == "Basic " + base64.b64encode(b"ops:p@ss").decode()
    assert headers["user-agent"] == f"sebridge/{__version__}"


@pytest.mark.parametrize("no_proxy", ["127.0.0.1", "localhost,127.0.0.0/8"])
def test_no_proxy_hosts_and_networks_go_direct(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch, no_proxy: str
) -> None:
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{free_port()}")  # nobody listens
    monkeypatch.setenv("NO_PROXY", no_proxy)
    client = HttpClient(timeout=5)
    try:
        assert client.request("POST", receiver.url + "/x").status == 200
    finally:
        client.close()
    assert [line for line, _ in receiver.seen] == ["POST /x HTTP/1.1"]


def test_without_proxies_the_environment_is_not_read(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{free_port()}")
    client = HttpClient(timeout=5, proxies=False)
    try:
        assert client.request("POST", receiver.url + "/x").status == 200
    finally:
        client.close()


def test_a_callers_header_replaces_ours_whatever_its_case(receiver: Receiver) -> None:
    client = HttpClient(timeout=5)
    try:
        headers = {
            "Content-Type": "application/json",
            "content-type": "text/plain",
            "user-agent": "x",
        }
        client.request("POST", receiver.url, body=b"a", headers=headers)
    finally:
        client.close()
    ((_, seen),) = receiver.seen
    assert (seen["content-type"], seen["user-agent"]) == ("text/plain", "x")


def test_an_answer_over_the_limit_is_refused_or_cut(receiver: Receiver) -> None:
    receiver.body = b"x" * 100
    client = HttpClient(timeout=5)
    try:
        with pytest.raises(TooLarge) as caught:
            client.request("POST", receiver.url, limit=10)
        assert caught.value.length == 100  # said by its Content-Length: not read
        assert client.request("POST", receiver.url, limit=10, excerpt=True).body == b"x" * 10
        assert client.request("POST", receiver.url, limit=100).body == b"x" * 100
    finally:
        client.close()


def test_no_answer_says_what_happened_and_never_the_url() -> None:
    client = HttpClient(timeout=5)
    url = f"http://127.0.0.1:{free_port()}/hook?sig=SECRETSIG"
    try:
        with pytest.raises(NoAnswer) as caught:
            client.request("POST", url)
    finally:
        client.close()
    assert isinstance(caught.value.cause, ConnectionRefusedError)
    assert not caught.value.sent
    assert str(caught.value) == "ConnectionRefusedError"
