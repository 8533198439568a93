"""The shared kernel: clock, backoff, Retry-After and redaction, and that callers use it."""

from __future__ import annotations

import ast
import math
import sys
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest

import sebridge.kernel
from sebridge.imds.answers import check_status
from sebridge.integrations.jira import errors as jira_errors
from sebridge.integrations.slack import errors as slack_errors
from sebridge.integrations.teams import errors as teams_errors
from sebridge.kernel.backoff import MAX_DOUBLINGS, backoff_delay
from sebridge.kernel.clock import utcnow
from sebridge.kernel.delivery_status import StatusRules
from sebridge.kernel.redact import Masker, redact_url, scrub, url_secrets
from sebridge.kernel.retry_after import parse_retry_after, retry_after

NOW = datetime(2026, 11, 23, 14, 0, tzinfo=UTC)


def at_now() -> datetime:
    return NOW


def http_date(moment: datetime) -> str:
    return format_datetime(moment, usegmt=True)


# -- clock ------------------------------------------------------------------------------------


def test_utcnow_is_aware_utc_and_current() -> None:
    before = datetime.now(UTC)
    now = utcnow()
    after = datetime.now(UTC)
    assert now.tzinfo is UTC
    assert before <= now <= after


# -- backoff ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attempt", "base", "cap", "jitter", "expected"),
    [
        (0, 1.0, 300.0, 0.5, 1.0),  # first retry, mid jitter: the base itself
        (1, 1.0, 300.0, 0.5, 2.0),
        (4, 1.0, 300.0, 0.5, 16.0),
        (8, 1.0, 300.0, 0.5, 256.0),  # still under the cap
        (9, 1.0, 300.0, 0.5, 300.0),  # capped
        (9, 1.0, 300.0, 0.0, 150.0),  # the cap is applied before the jitter
        (1000, 1.0, 300.0, 0.5, 300.0),  # no overflow however many attempts
        (0, 0.1, math.inf, 0.0, 0.05),
        (2, 0.1, math.inf, 0.5, 0.4),
        (0, 2.0, 1.0, 0.5, 1.0),  # a cap below the base wins
    ],
)
def test_backoff_table(
    attempt: int, base: float, cap: float, jitter: float, expected: float
) -> None:
    assert backoff_delay(attempt, base=base, cap=cap, jitter=jitter) == pytest.approx(expected)


def test_backoff_doubles_until_the_cap() -> None:
    waits = [backoff_delay(a, base=1.0, cap=100.0, jitter=0.5) for a in range(10)]
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 100.0, 100.0, 100.0]


def test_backoff_without_a_cap_stops_doubling_at_max_doublings() -> None:
    top = backoff_delay(MAX_DOUBLINGS, base=1.0, jitter=0.5)
    assert top == 2.0**MAX_DOUBLINGS
    assert backoff_delay(MAX_DOUBLINGS + 50, base=1.0, jitter=0.5) == top


@pytest.mark.parametrize("attempt", [0, 1, 3, 7, 12])
@pytest.mark.parametrize("jitter", [0.0, 0.25, 0.5, 0.999999])
def test_backoff_jitter_stays_within_half_to_one_and_a_half(attempt: int, jitter: float) -> None:
    plain = min(300.0, 2.0**attempt)
    wait = backoff_delay(attempt, base=1.0, cap=300.0, jitter=jitter)
    assert 0.5 * plain <= wait < 1.5 * plain


def test_backoff_refuses_a_negative_attempt() -> None:
    with pytest.raises(ValueError, match="attempt"):
        backoff_delay(-1, base=1.0, jitter=0.5)


# -- Retry-After ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),
        (" 7 ", 7.0),
        ("1.5", 1.5),
        ("0", 0.0),
        ("-3", 0.0),  # never negative
        (b"9", 9.0),
        (4, 4.0),
        (2.5, 2.5),
        (["30"], 30.0),  # slack_sdk's header values are lists
        (("11", "99"), 11.0),  # the first of several
        ([], 42.0),
        (None, 42.0),
        ("", 42.0),
        ("   ", 42.0),
        ("soon", 42.0),
        ("12 seconds", 42.0),
        ("inf", 42.0),
        ("nan", 42.0),
        (True, 42.0),
        ({"seconds": 3}, 42.0),
        (http_date(NOW + timedelta(seconds=90)), 90.0),  # a date in the future
        (http_date(NOW - timedelta(hours=1)), 0.0),  # a date in the past: at once
        ("Mon, 23 Nov 2026 14:00:30 -0000", 30.0),  # a date without a zone is UTC
        ("Mon, 23 Nov 2026 15:00:30 +0100", 30.0),
        ("Mon, 99 Nov 2026 14:00:30 GMT", 42.0),  # no such day
    ],
)
def test_parse_retry_after_table(value: object, expected: float) -> None:
    assert parse_retry_after(value, default=42.0, now=at_now) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("value", "cap", "expected"),
    [
        ("7200", 3600.0, 3600.0),
        ("3600", 3600.0, 3600.0),
        ("10", 3600.0, 10.0),
        (http_date(NOW + timedelta(days=2)), 3600.0, 3600.0),
        ("7200", None, 7200.0),
        ("garbage", 1.0, 5.0),  # the default is the caller's own, not capped
    ],
)
def test_parse_retry_after_cap(value: str, cap: float | None, expected: float) -> None:
    assert parse_retry_after(value, default=5.0, cap=cap, now=at_now) == expected


def test_parse_retry_after_default_may_be_none() -> None:
    assert parse_retry_after("nonsense", default=None) is None
    assert parse_retry_after(None, default=None) is None
    assert parse_retry_after("2", default=None) == 2.0


def test_the_clock_is_only_asked_for_a_date() -> None:
    asked: list[int] = []

    def clock() -> datetime:
        asked.append(1)
        return NOW

    assert parse_retry_after("5", default=0.0, now=clock) == 5.0
    assert asked == []
    assert parse_retry_after(http_date(NOW + timedelta(seconds=5)), default=0.0, now=clock) == 5.0
    assert asked == [1]


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "3"}, 3.0),
        ({"retry-after": "3"}, 3.0),
        ({"RETRY-AFTER": "3"}, 3.0),
        ({"Content-Type": "text/plain", "rEtRy-AfTeR": ["8"]}, 8.0),
        ({"Retry-After": http_date(NOW + timedelta(seconds=45))}, 45.0),
        ({"Retry-After": "later"}, 1.0),
        ({"X-Retry-After": "3"}, 1.0),  # not the header
        ({}, 1.0),
        (None, 1.0),
    ],
)
def test_retry_after_from_headers(headers: dict[str, Any] | None, expected: float) -> None:
    assert retry_after(headers, default=1.0, now=at_now) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("rules", "absent", "garbage", "big"),
    [
        (slack_errors.RULES, 1.0, 1.0, 7200.0),
        (jira_errors.RULES, 1.0, 1.0, 7200.0),
        (teams_errors.RULES, 5.0, 5.0, 3600.0),
    ],
)
def test_each_integration_keeps_its_default_and_cap(
    rules: StatusRules, absent: float, garbage: float, big: float
) -> None:
    def wait(headers: dict[str, str]) -> float | None:
        failure = rules.failure(429, headers)
        assert failure is not None and failure.retry
        return failure.wait

    assert wait({}) == absent
    assert wait({"Retry-After": "whenever"}) == garbage
    assert wait({"retry-after": "7200"}) == big
    assert wait({"RETRY-AFTER": "2"}) == 2.0
    future = http_date(datetime.now(UTC) + timedelta(seconds=600))
    assert 590.0 <= (wait({"Retry-After": future}) or 0.0) <= 600.0


def test_imds_429_has_no_retry_after_when_absent() -> None:
    from sebridge.kernel.errors import ImdsThrottledError

    for headers, expected in (
        ({}, None),
        ({"retry-after": "x"}, None),
        ({"retry-after": "3"}, 3.0),
    ):
        with pytest.raises(ImdsThrottledError) as caught:
            check_status("GET", "/metadata/scheduledevents", 429, headers, b"")
        assert caught.value.retry_after == expected


# -- redaction --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "secrets", "expected"),
    [
        ("token abc123 here", ["abc123"], "token *** here"),
        ("abc123 and abc123", ["abc123"], "*** and ***"),
        # A secret inside another goes whole, whatever order they come in.
        ("key=supersecret!", ["secret", "supersecret"], "key=***!"),
        ("key=supersecret!", ["supersecret", "secret"], "key=***!"),
        # Overlapping secrets leave no piece of either.
        ("xxABCDEFyy", ["ABCD", "CDEF"], "xx***yy"),
        ("ABCDEF", ["ABC", "DEF"], "***"),
        ("nothing here", ["absent"], "nothing here"),
        ("keep", ["", ""], "keep"),
        ("", ["s3cret"], ""),
        ("aaaa", ["aa"], "***"),
        # A replacement is never matched again.
        ("a*b", ["*"], "a***b"),
    ],
)
def test_scrub_table(text: str, secrets: list[str], expected: str) -> None:
    assert scrub(text, secrets) == expected


def test_scrub_takes_any_iterable_and_a_mask() -> None:
    assert scrub("pw=hunter2", (s for s in ["hunter2"])) == "pw=***"
    assert scrub("xoxb-1-2 said no", ["xoxb-1-2"], mask="xox?-***") == "xox?-*** said no"


WEBHOOK = (
    "https://prod-01.westeurope.logic.azure.com:443/workflows/0123456789abcdef/triggers/manual"
    "/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0"
    "&sig=AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
)


def test_url_secrets_of_a_webhook() -> None:
    pieces = url_secrets(WEBHOOK)
    path = "/workflows/0123456789abcdef/triggers/manual/paths/invoke"
    query = WEBHOOK.split("?", 1)[1]
    assert pieces[:4] == [WEBHOOK, f"{path}?{query}", path, query]
    assert "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789" in pieces  # the signature
    assert "%2Ftriggers%2Fmanual%2Frun" in pieces  # a value as written
    assert "/triggers/manual/run" in pieces  # and decoded
    assert "1.0" not in pieces and "2016-06-01" in pieces  # only pieces longer than 8
    assert all(len(p) > 8 for p in pieces)
    assert len(pieces) == len(set(pieces))


def test_url_secrets_percent_encode_values() -> None:
    pieces = url_secrets("https://h.example/hook?sig=a%2Bb%2Fc%3Dlonger")
    assert "a+b/c=longer" in pieces
    assert "a%2Bb%2Fc%3Dlonger" in pieces


def test_url_secrets_of_a_short_url_are_few() -> None:
    assert url_secrets("http://h/?a=1") == ["http://h/?a=1"]


def test_scrub_with_url_secrets_leaves_no_signature() -> None:
    echoed = f"bad request to {WEBHOOK} (sig AbCdEfGhIjKlMnOpQrStUvWxYz0123456789)"
    clean = scrub(echoed, url_secrets(WEBHOOK))
    assert "AbCdEf" not in clean and "workflows" not in clean
    assert clean == "bad request to *** (sig ***)"
    assert teams_errors.scrub(echoed, WEBHOOK) == clean


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://bridge:hunter2@db:5432/se", "postgresql://bridge:***@db:5432/se"),
        ("postgresql://db/se?password=hunter2", "postgresql://db/se?***"),
        ("https://example.net/path", "https://example.net/path"),
        ("sqlite:////var/lib/sebridge.db", "sqlite:////var/lib/sebridge.db"),
        ("http://[::1", "***"),  # unreadable: nothing shown
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected


def test_jira_scrub_is_the_kernels() -> None:
    assert jira_errors.scrub("a token-42 b", ["token-42", ""]) == "a *** b"


# -- the kernel's own dependencies ------------------------------------------------------------


def test_the_kernel_imports_only_the_standard_library() -> None:
    """And urllib3 in the one HTTP client the code sebridge owns shares (IMDS, the webhook,
    Teams, Kubernetes): a well-kept library, not a unit of sebridge's."""
    allowed_sebridge = {"sebridge.errors", "sebridge"}  # the package's root: its version
    libraries = {"http_client.py": {"urllib3"}}
    for path in Path(sebridge.kernel.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top == "sebridge":
                    assert name.startswith("sebridge.kernel") or name in allowed_sebridge, (
                        f"{path.name} imports {name}"
                    )
                else:
                    allowed = top in sys.stdlib_module_names or top == "__future__"
                    assert allowed or top in libraries.get(path.name, ()), (
                        f"{path.name} imports {name}"
                    )


def test_a_masker_masks_its_secrets_and_never_shows_them() -> None:
    masker = Masker(["hunter22", "", "xoxb-1-2-3"])
    assert masker and masker.margin == len("xoxb-1-2-3")
    assert masker.mask("pw hunter22 tok xoxb-1-2-3.") == "pw *** tok ***."
    assert "hunter22" not in repr(masker) and not Masker([""])
    assert Masker().mask("as it is") == "as it is"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("22 then the rest", "the rest"),  # a secret's end before the cut: dropped with it
        ("abcdef hunter22 x", "*** x"),  # one that crosses the cut: masked whole
        ("abcdefghij hunter22", "ij ***"),  # one after it: masked
    ],
)
def test_a_maskers_tail_drops_its_margin_and_masks_across_the_cut(text: str, expected: str) -> None:
    assert Masker(["hunter22"]).tail(text, cut=True) == expected
    assert Masker(["hunter22"]).tail(text, cut=False) == text.replace("hunter22", "***")
