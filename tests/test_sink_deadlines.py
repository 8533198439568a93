"""Issue 37, item 5: each sink's `timeout` bounds its whole call, connect to the answer's
last byte, not each read. A receiver that takes the request, then drips a valid answer one
byte every 0.5 s (each byte well within a read timeout, the whole answer some 40 s off),
holds each sink about its timeout (1 s), which then says the receiver did not answer within
it and is retried. E-mail and the webhook: tests/test_email_sink.py, tests/test_webhook_hang.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fakes.drip import DrippingHttp
from fakes.kubernetes import make_tls
from sebridge.config.secrets import Secret
from sebridge.integrations.jira.client import JiraApi
from sebridge.integrations.jira.settings import JiraSettings
from sebridge.integrations.jira.sink import JiraSink
from sebridge.integrations.kubernetes.client import KubeApi
from sebridge.integrations.kubernetes.sink import KubernetesSink
from sebridge.integrations.render import Renderer
from sebridge.integrations.slack.sink import SlackSink, build_slack_client
from sebridge.integrations.teams.sink import TeamsSink
from sebridge.kernel.errors import RetryableDeliveryError
from test_kubernetes_sink import message as kube_message
from test_webhook import message

pytestmark = pytest.mark.usefixtures("no_proxy")


@pytest.fixture
def drip() -> Iterator[DrippingHttp]:
    with DrippingHttp(every=0.5) as server:
        yield server


@pytest.fixture
def tls_drip() -> Iterator[DrippingHttp]:
    _, cert, key = make_tls()
    with DrippingHttp(every=0.5, tls=(cert, key)) as server:
        yield server


def held(send: Callable[[], object]) -> tuple[float, str]:
    """How long `send` took to raise the retryable error, and what it said."""
    began = time.monotonic()
    with pytest.raises(RetryableDeliveryError) as caught:
        send()
    return time.monotonic() - began, str(caught.value)


@pytest.mark.parametrize("fmt", ["adaptive", "messagecard"])
def test_teams_held_by_a_dripping_webhook_no_longer_than_its_timeout(
    drip: DrippingHttp, fmt: str
) -> None:
    sink = TeamsSink(drip.url + "/workflows/x", Renderer(), format=fmt, timeout=1)
    try:
        seconds, said = held(lambda: sink.send(message()))
    finally:
        sink.close()
    assert said == (
        "teams: the webhook took the card and did not answer within 1 s (teams.timeout); will retry"
    )
    assert drip.taken and drip.seconds > 20
    assert seconds < 5  # about 1 s: the timeout, not the drip


def test_kubernetes_held_by_a_dripping_api_server_no_longer_than_its_timeout(
    tls_drip: DrippingHttp, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("a-token\n")
    ca, _, _ = make_tls()
    api = KubeApi(tls_drip.url, str(token), str(ca), timeout=1)
    try:
        seconds, said = held(lambda: KubernetesSink(api).send(kube_message()))
    finally:
        api.close()
    assert said == (
        f"kubernetes: the API server {tls_drip.url} did not answer within 1 s"
        " (kubernetes.timeout); will retry"
    )
    assert tls_drip.taken and "a-token" not in said
    assert seconds < 5


def test_jira_held_by_a_dripping_jira_no_longer_than_its_timeout(drip: DrippingHttp) -> None:
    settings = JiraSettings(url=drip.url, project="OPS", pat=Secret("a-pat"))
    api = JiraApi(settings, timeout=(5.0, 1.0))
    try:
        seconds, said = held(lambda: JiraSink(api, Renderer()).send(message()))
    finally:
        api.close()
    assert said.startswith("jira: cannot ")
    assert said.endswith(
        f": cannot reach Jira at {drip.url}: timed out (did not answer within 1 s); will retry"
    )
    assert drip.taken
    assert seconds < 5


def test_slack_held_by_a_dripping_web_api_no_longer_than_its_timeout(
    tls_drip: DrippingHttp, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca, _, _ = make_tls()
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))  # trusted as the system's CAs would be
    client = build_slack_client("xoxb-a-token", tls_drip.url + "/api/", timeout=1)
    sink = SlackSink(client, "C0123456789", Renderer())
    seconds, said = held(lambda: sink.send(message()))
    assert said.startswith("slack: ")
    assert said.endswith(" to C0123456789: Slack did not answer within 1 s; will retry")
    assert tls_drip.taken and "a-token" not in said
    assert seconds < 5
