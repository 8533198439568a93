"""kernel/net_cause.py: a failed request's cause in a few words, found along the
exception's chain, never its text (which may quote a URL carrying a secret)."""

from __future__ import annotations

import socket

import pytest
import requests

from helpers import free_port
from sebridge.kernel.net_cause import no_answer_cause

pytestmark = pytest.mark.usefixtures("no_proxy")  # straight to loopback


def test_a_refused_connection_through_requests_is_said_so_without_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}/workflows/x?sig=SECRET"
    with pytest.raises(requests.ConnectionError) as caught:
        requests.post(url, json={}, timeout=5)
    assert no_answer_cause(caught.value) == "connection refused"


def test_a_read_timeout_through_requests_is_said_so() -> None:
    """requests' ReadTimeout holds urllib3's ReadTimeoutError: neither is a TimeoutError."""
    with socket.create_server(("127.0.0.1", 0)) as silent:  # takes the connection, says nothing
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/?sig=SECRET"
        with pytest.raises(requests.ReadTimeout) as caught:
            requests.post(url, json={}, timeout=0.3)
    assert no_answer_cause(caught.value) == "timed out"


def test_a_cause_and_a_reason_are_followed_and_a_loop_ends() -> None:
    class Wrapper(Exception):
        def __init__(self, reason: BaseException) -> None:
            super().__init__("GET http://h/?sig=SECRET failed")
            self.reason = reason

    inner = ConnectionResetError()
    assert no_answer_cause(Wrapper(inner)) == "connection reset"
    looped = RuntimeError("http://h/?sig=SECRET")
    looped.__context__ = ValueError()
    looped.__context__.__context__ = looped
    assert no_answer_cause(looped) == "RuntimeError"  # its type: never its text
