"""ImdsClient against the simulator over real sockets: what IMDS received, what we made of it."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from sebridge.imds import API_VERSIONS, ImdsClient
from sebridge.imds.simulator import Simulator
from sebridge.kernel.errors import (
    ImdsRequestError,
    ImdsThrottledError,
    ImdsTimeoutError,
    ImdsUnavailableError,
    MalformedDocumentError,
)


class Sleeps:
    """Records the waits the client asks for instead of sleeping them."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


@pytest.fixture
def sim(make_sim: Callable[..., Simulator]) -> Simulator:
    # Not conftest's: a VM name with a hyphen (2017-03-01 spells it "_web-1"), and events
    # that start 2 s after their approval, as IMDS's.
    return make_sim(vm_name="web-1")


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def client(sim: Simulator, sleeps: Sleeps) -> Iterator[ImdsClient]:
    imds = ImdsClient(sim.url, timeout=1.0, first_timeout=5.0, sleep=sleeps, jitter=lambda: 0.5)
    yield imds
    imds.close()


def test_idle_document(client: ImdsClient) -> None:
    doc = client.get_document()
    assert doc.events == ()
    assert isinstance(doc.incarnation, int)


def test_scheduled_event_arrives_with_every_field(sim: Simulator, client: ImdsClient) -> None:
    event_id = sim.schedule("Reboot", source="User", duration=30, description="restart")
    (event,) = client.get_document().events
    assert event.event_id == event_id
    assert (event.event_type, event.status, event.source) == ("Reboot", "Scheduled", "User")
    assert event.resources == ("web-1",) and event.affects("web-1")
    assert event.description == "restart" and event.duration_seconds == 30
    assert event.not_before is not None


@pytest.mark.parametrize("version", API_VERSIONS)
def test_every_documented_version_is_selectable(sim: Simulator, version: str) -> None:
    sim.schedule("Freeze", duration=5)
    with_version = ImdsClient(sim.url, version, first_timeout=5.0)
    (event,) = with_version.get_document().events
    assert (event.description is not None) == (version >= "2019-04-01")
    assert (event.source is not None) == (version >= "2019-08-01")
    assert (event.duration_seconds is not None) == (version >= "2020-07-01")
    assert event.affects("web-1")  # also in 2017-03-01, where the name is "_web-1"
    with_version.close()


def test_unknown_version_is_refused_before_any_request() -> None:
    with pytest.raises(ValueError, match="2020-07-01"):
        ImdsClient("http://127.0.0.1:1", "latest")


@pytest.mark.parametrize(
    "endpoint", ["169.254.169.254", "ftp://x", "http://h/metadata", "http://h:x"]
)
def test_bad_endpoints_are_refused(endpoint: str) -> None:
    with pytest.raises(ValueError, match="endpoint"):
        ImdsClient(endpoint)


def test_polls_reuse_one_connection(sim: Simulator, client: ImdsClient) -> None:
    for _ in range(20):
        client.get_document()
    assert len({r.client for r in sim.requests}) == 1


def test_unchanged_document_is_the_same_object(sim: Simulator, client: ImdsClient) -> None:
    first = client.get_document()
    assert client.get_document() is first
    sim.schedule("Freeze", duration=5)
    changed = client.get_document()
    assert changed is not first and len(changed.events) == 1
    assert client.get_document() is changed


def test_proxy_variables_are_ignored(
    sim: Simulator, client: ImdsClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A proxy that does not exist: any request sent through it would fail.
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert client.get_document().events == ()


def test_400_is_not_retried(sim: Simulator, client: ImdsClient, sleeps: Sleeps) -> None:
    client.get_document()
    sim.inject("status", status=400, count=5)
    with pytest.raises(ImdsRequestError, match="400") as info:
        client.get_document()
    assert info.value.retryable is False and sleeps.calls == []


@pytest.mark.parametrize("status", [404, 410, 500, 503])
def test_transient_status_is_retried_then_succeeds(
    sim: Simulator, client: ImdsClient, sleeps: Sleeps, status: int
) -> None:
    sim.inject("status", status=status, count=1)
    assert client.get_document().events == ()
    assert len(sleeps.calls) == 1


def test_persistent_500_becomes_unavailable_after_bounded_retries(
    sim: Simulator, client: ImdsClient, sleeps: Sleeps
) -> None:
    sim.inject("500", count=10)
    with pytest.raises(ImdsUnavailableError, match="500"):
        client.get_document()
    assert len(sleeps.calls) == 2
    assert sleeps.calls[1] > sleeps.calls[0]  # backoff grows


def test_429_waits_for_retry_after(sim: Simulator, client: ImdsClient, sleeps: Sleeps) -> None:
    sim.inject("429", count=1)
    assert client.get_document().events == ()
    assert sleeps.calls and sleeps.calls[0] >= 1.0


def test_persistent_429_is_a_throttled_error(sim: Simulator, client: ImdsClient) -> None:
    sim.inject("429", count=10)
    with pytest.raises(ImdsThrottledError, match="5 requests per second") as info:
        client.get_document()
    assert info.value.retry_after == 1.0 and info.value.retryable


def test_a_hanging_imds_times_out_without_in_call_retry(
    sim: Simulator, client: ImdsClient, sleeps: Sleeps
) -> None:
    client.get_document()
    sim.inject("hang", seconds=10)
    with pytest.raises(ImdsUnavailableError, match="did not answer"):
        client.get_document()
    assert sleeps.calls == []
    assert client.get_document().events == ()  # and the next poll recovers


def test_a_silent_imds_times_out_at_the_read_timeout(sleeps: Sleeps) -> None:
    """A receive that waited the timeout out is a timeout, said as one, not asked again."""
    with socket.socket() as silent:  # takes the connection (its backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        client = ImdsClient(url, timeout=0.3, first_timeout=0.3, sleep=sleeps)
        started = time.monotonic()
        with pytest.raises(ImdsTimeoutError, match=r"did not answer .* within 0\.3s"):
            client.get_document()
        assert 0.25 <= time.monotonic() - started < 3.0
        assert sleeps.calls == []
        client.close()


@pytest.mark.parametrize("call", ["get", "post"])
def test_interrupt_cuts_a_waiting_call_short(sim: Simulator, call: str) -> None:
    """The daemon's stop (ImdsClient.interrupt from another thread) ends a call IMDS
    hangs on, the poll's GET or an approval's POST, and every call after it."""
    event_id = sim.schedule("Reboot")
    client = ImdsClient(sim.url, timeout=30.0, first_timeout=30.0)
    client.get_document()
    sim.inject("hang", seconds=60)
    errors: list[BaseException] = []

    def waiting() -> None:
        try:
            client.get_document() if call == "get" else client.start([event_id])
        except ImdsTimeoutError as exc:
            errors.append(exc)

    caller = threading.Thread(target=waiting)
    caller.start()
    deadline = time.monotonic() + 10
    while sim.faults and time.monotonic() < deadline:  # taken when the request arrives
        time.sleep(0.01)
    asked = len(sim.requests)
    started = time.monotonic()
    client.interrupt()
    caller.join(10)
    assert not caller.is_alive() and time.monotonic() - started < 2.0
    assert [str(e) for e in errors] == [
        f"IMDS {call.upper()} /metadata/scheduledevents abandoned: sebridge is stopping"
    ]
    with pytest.raises(ImdsTimeoutError, match="abandoned"):
        client.get_document()
    assert len(sim.requests) == asked  # the later call never went out
    client.close()


def test_first_call_waits_for_a_slow_enabling_imds(sim: Simulator) -> None:
    sim.inject("slow_first", seconds=1.0)
    # The per-call timeout is shorter than the delay; the first call's is not.
    patient = ImdsClient(sim.url, timeout=0.2)
    assert patient.get_document().events == ()
    patient.close()


def test_connection_refused_is_unavailable(sleeps: Sleeps) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = ImdsClient(f"http://127.0.0.1:{port}", sleep=sleeps)
    with pytest.raises(ImdsUnavailableError, match="connection refused"):
        dead.get_document()
    assert len(sleeps.calls) == 2


def test_reset_connection_is_retried(sim: Simulator, client: ImdsClient) -> None:
    client.get_document()
    sim.inject("reset", count=1)
    assert client.get_document().events == ()


def test_malformed_json_raises_and_the_next_poll_recovers(
    sim: Simulator, client: ImdsClient
) -> None:
    sim.inject("malformed", count=1)
    with pytest.raises(MalformedDocumentError, match="not JSON"):
        client.get_document()
    assert client.get_document().events == ()


def test_proxy_html_page_names_the_likely_cause(sim: Simulator, client: ImdsClient) -> None:
    sim.inject("html", count=1)
    with pytest.raises(MalformedDocumentError, match="proxy"):
        client.get_document()


def test_start_posts_start_requests(sim: Simulator, client: ImdsClient) -> None:
    event_id = sim.schedule("Reboot")
    client.start([event_id])
    client.start([event_id], incarnation=client.get_document().incarnation)  # repeat: still 200
    assert sim.start_requests == [event_id, event_id]


def test_start_of_an_unknown_event_is_a_clear_400(sim: Simulator, client: ImdsClient) -> None:
    with pytest.raises(ImdsRequestError, match="400"):
        client.start(["00000000-0000-0000-0000-000000000000"])
    assert sim.start_requests == []


def test_start_needs_ids(client: ImdsClient) -> None:
    with pytest.raises(ValueError, match="event id"):
        client.start([])


def test_approved_event_starts(sim: Simulator, client: ImdsClient) -> None:
    event_id = sim.schedule("Reboot", source="User")
    client.start([event_id])
    sim.start_event(event_id)
    (event,) = client.get_document().events
    assert event.started and event.not_before is None and event.not_before_text == ""


def test_instance_name_is_the_compute_name(client: ImdsClient) -> None:
    assert client.instance_name() == "web-1"


def test_every_attempt_is_told_with_its_outcome(sim: Simulator, client: ImdsClient) -> None:
    """Five 500s, then five 429s (Retry-After: 1), then a 503 on a StartRequests POST:
    each HTTP request IMDS received is told once, retries apart from the call's end."""
    outcomes: list[str] = []
    client.on_request(outcomes.append)
    event_id = sim.schedule("Reboot")
    client.get_document()
    assert outcomes == ["ok"]
    sim.inject("500", count=5)
    with pytest.raises(ImdsUnavailableError):
        client.get_document()
    client.get_document()
    assert outcomes[1:] == ["retry", "retry", "error", "retry", "retry", "ok"]
    sim.inject("429", count=5)
    with pytest.raises(ImdsThrottledError):
        client.get_document()
    client.get_document()
    assert outcomes[7:] == ["throttled", "throttled", "error", "throttled", "throttled", "ok"]
    sim.inject("status", status=503, count=1)
    client.start([event_id])
    assert outcomes[13:] == ["retry", "ok"]
    assert len(sim.start_requests) == 1
    assert len(outcomes) == len(sim.requests)  # every request IMDS received, no more
