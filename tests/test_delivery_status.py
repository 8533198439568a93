"""The one status-to-retry mapping (kernel/delivery_status.py), as a table, and what each
integration configures of it."""

from __future__ import annotations

import http.client
import socket
import urllib.error
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
import requests

from sebridge.integrations.jira.errors import RULES as JIRA
from sebridge.integrations.slack.errors import RULES as SLACK
from sebridge.integrations.teams.errors import RULES as TEAMS
from sebridge.kernel.delivery_status import NO_ANSWER, UNANSWERED, Failure, StatusRules
from sebridge.kernel.errors import PermanentDeliveryError, RetryableDeliveryError

NOW = datetime(2026, 11, 23, 14, 0, tzinfo=UTC)
PLAIN = StatusRules()


def at_now() -> datetime:
    return NOW


@pytest.mark.parametrize("status", [200, 201, 202, 204, 299])
def test_every_2xx_is_delivered(status: int) -> None:
    assert PLAIN.failure(status, {"Retry-After": "9"}) is None


@pytest.mark.parametrize("status", [300, 304, 400, 401, 403, 404, 409, 413, 418, 422, 451, 600])
def test_other_statuses_are_permanent(status: int) -> None:
    assert PLAIN.failure(status, {"Retry-After": "9"}) == Failure(retry=False, status=status)


@pytest.mark.parametrize(
    ("status", "headers", "wait"),
    [
        (408, {}, None),  # the dispatcher's backoff
        (408, {"Retry-After": "3"}, 3.0),
        (429, {}, 1.0),  # a throttle without Retry-After: the API's default
        (429, {"retry-after": "garbage"}, 1.0),
        (429, {"Retry-After": "7"}, 7.0),
        (429, {"Retry-After": format_datetime(NOW + timedelta(seconds=45), usegmt=True)}, 45.0),
        (500, {}, None),
        (502, {}, None),
        (503, {}, None),
        (503, {"Retry-After": "4"}, 4.0),
        (599, {"Retry-After": "0"}, 0.0),
    ],
)
def test_408_429_and_5xx_are_retried_after_retry_after_when_given(
    status: int, headers: dict[str, str], wait: float | None
) -> None:
    assert PLAIN.failure(status, headers, now=at_now) == Failure(True, wait, status)


def test_a_cap_and_more_throttles() -> None:
    rules = StatusRules(default_wait=5.0, throttles=frozenset({429, 503}), cap=60.0)
    assert rules.failure(429, {"Retry-After": "7200"}) == Failure(True, 60.0, 429)
    assert rules.failure(503, {}) == Failure(True, 5.0, 503)
    assert rules.failure(500, {}) == Failure(True, None, 500)


@pytest.mark.parametrize(
    ("status", "code", "counts_as"),
    [
        (200, "ratelimited", 429),  # Slack: ok:false on an HTTP 200
        (200, "internal_error", 500),
        (200, "request_timeout", 408),
        (200, "invalid_auth", 400),  # a word it does not know: refused
        (200, "", 200),  # no word: the status alone
        (404, "ratelimited", 429),
        (401, "unheard_of", 401),
        (503, "invalid_auth", 503),  # a retried status wins over the word
        (429, "channel_not_found", 429),
    ],
)
def test_an_apis_own_words_stand_for_a_status(status: int, code: str, counts_as: int) -> None:
    assert SLACK.stands_for(status, code) == counts_as
    failure = SLACK.failure(status, {}, code=code)
    assert (failure.status if failure else 200) == counts_as


def test_the_integrations_differ_only_where_their_apis_do() -> None:
    assert (SLACK.default_wait, SLACK.throttles, SLACK.cap) == (1.0, frozenset({429}), None)
    assert (TEAMS.default_wait, TEAMS.throttles, TEAMS.cap) == (5.0, frozenset({429}), 3600.0)
    assert (JIRA.default_wait, JIRA.throttles, JIRA.cap) == (1.0, frozenset({429, 503}), None)
    assert not TEAMS.codes and not JIRA.codes


def test_a_failure_is_the_error_the_dispatcher_reads() -> None:
    retry = Failure(True, 7.0, 429).error("throttled")
    assert type(retry) is RetryableDeliveryError and retry.retry_after == 7.0
    assert str(retry) == "throttled"
    fail = Failure(False, None, 404).error("not found")
    assert type(fail) is PermanentDeliveryError and fail.retry_after is None
    unanswered = UNANSWERED.error("cannot reach")
    assert type(unanswered) is RetryableDeliveryError and unanswered.retry_after is None


@pytest.mark.parametrize(
    "exc",
    [
        ConnectionRefusedError(111, "Connection refused"),
        ConnectionResetError(104, "Connection reset by peer"),
        TimeoutError("timed out"),
        socket.gaierror(-2, "Name or service not known"),
        urllib.error.URLError("refused"),
        http.client.RemoteDisconnected("Remote end closed connection without response"),
        http.client.IncompleteRead(b"par", 10),
        requests.ConnectionError("refused"),
        requests.Timeout("read timed out"),
    ],
)
def test_no_answer_covers_what_the_clients_raise(exc: BaseException) -> None:
    assert isinstance(exc, NO_ANSWER)
