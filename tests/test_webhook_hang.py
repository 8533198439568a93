"""What a webhook delivery that got no answer says (issue 34, finding 12: a receiver that
took the connection and the request, then hung, was reported as "cannot reach the webhook").

The webhook sink against the fake receiver on a real socket: one that hangs, one that
closes the connection without answering, and a port nobody listens on; and a Teams
webhook that hangs.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from fakes.teams import FakeTeams
from fakes.webhook import FakeWebhook
from sebridge.integrations.render import Renderer
from sebridge.integrations.teams.sink import TeamsSink
from sebridge.kernel.errors import RetryableDeliveryError
from test_webhook import KEY, build, message

pytestmark = pytest.mark.usefixtures("no_proxy")


@pytest.fixture
def hook() -> Iterator[FakeWebhook]:
    with FakeWebhook(keys=[KEY]) as fake:
        yield fake


def test_a_receiver_that_takes_the_request_and_hangs_did_not_answer_in_time(
    hook: FakeWebhook,
) -> None:
    release = hook.hold_next()
    try:
        with pytest.raises(RetryableDeliveryError) as caught:
            build({"url": hook.url, "secret": KEY, "timeout": 0.5}).send(message())
    finally:
        release.set()
    assert len(hook.posts) == 1  # it took the request
    said = str(caught.value)
    assert said == (
        "webhook: the webhook took the request and did not answer within 0.5 s"
        " (webhook.timeout); will retry"
    )
    assert "cannot reach" not in said and hook.sig not in said


def test_a_receiver_that_closes_without_an_answer_says_so() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]

        def take_and_close() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(65536)  # the request, then nothing: the connection closes

        taker = threading.Thread(target=take_and_close, daemon=True)
        taker.start()
        with pytest.raises(RetryableDeliveryError) as caught:
            build({"url": f"http://127.0.0.1:{port}/hook", "secret": KEY}).send(message())
        taker.join(5)
    assert str(caught.value).startswith(
        "webhook: the webhook closed the connection without a whole answer (RemoteDisconnected"
    )


def test_a_port_nobody_listens_on_cannot_be_reached() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]  # closed when the block ends: nobody listens
    with pytest.raises(RetryableDeliveryError) as caught:
        build({"url": f"http://127.0.0.1:{port}/hook", "secret": KEY}).send(message())
    assert str(caught.value).startswith("webhook: cannot reach the webhook (ConnectionRefusedError")


@pytest.mark.parametrize("fmt", ["adaptive", "messagecard"])
def test_a_teams_webhook_that_takes_the_card_and_hangs_did_not_answer_in_time(
    teams: FakeTeams, fmt: str
) -> None:
    url = teams.workflows_url if fmt == "adaptive" else teams.connector_url
    sink = TeamsSink(url, Renderer(), format=fmt, timeout=0.5)
    release = teams.hold_next()
    try:
        with pytest.raises(RetryableDeliveryError) as caught:
            sink.send(message())
    finally:
        release.set()
        sink.close()
    assert str(caught.value) == (
        "teams: the webhook took the card and did not answer within 0.5 s (teams.timeout);"
        " will retry"
    )


def test_a_receiver_that_drips_its_answer_holds_the_sink_no_longer_than_its_timeout() -> None:
    """Issue 37, item 5: each byte comes well within the timeout, the whole answer never;
    the timeout bounds the whole attempt, not each read."""
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"  # about 22 s at 0.5 s a byte
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        stop = threading.Event()

        def drip() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(65536)
                for byte in answer:
                    if stop.wait(0.5):
                        return
                    with contextlib.suppress(OSError):
                        conn.sendall(bytes([byte]))

        dripper = threading.Thread(target=drip, daemon=True)
        dripper.start()
        began = time.monotonic()
        try:
            with pytest.raises(RetryableDeliveryError) as caught:
                build({"url": f"http://127.0.0.1:{port}/hook", "secret": KEY, "timeout": 1}).send(
                    message()
                )
            held = time.monotonic() - began
        finally:
            stop.set()
            dripper.join(5)
    assert str(caught.value) == (
        "webhook: the webhook took the request and did not answer within 1 s"
        " (webhook.timeout); will retry"
    )
    assert held < 10  # about 1 s: the timeout, not the drip (about 22 s)
