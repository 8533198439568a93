"""The IMDS Scheduled Events simulator, exercised over real sockets with a plain HTTP client."""

from __future__ import annotations

import ast
import calendar
import contextlib
import http.client
import io
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import FakeClock
from sebridge.imds.simulator import API_VERSIONS, Simulator, demo_scenario, read_scenario, serve

START = float(
    calendar.timegm((2022, 4, 11, 22, 11, 58))
)  # a Monday, 15 min before the docs' example
EVENTS = "/metadata/scheduledevents?api-version="
MD = {"Metadata": "true"}


class Response:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    def json(self) -> Any:
        return json.loads(self.body)


def call(
    target: Simulator | http.client.HTTPConnection,
    method: str,
    path: str,
    body: bytes | str | dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    """One request; on a Simulator a fresh connection, on a connection reuse it."""
    if isinstance(target, Simulator):
        with contextlib.closing(
            http.client.HTTPConnection("127.0.0.1", target.port, timeout=5)
        ) as conn:
            return call(conn, method, path, body, headers)
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    target.request(method, path, body=data, headers=headers or {})
    resp = target.getresponse()
    raw = resp.read()
    # Every response, errors included, must carry an exact Content-Length (keep-alive).
    assert int(resp.getheader("Content-Length", "-1")) == len(raw)
    return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, raw)


def get_events(target: Simulator | http.client.HTTPConnection, version: str = "2020-07-01") -> Any:
    resp = call(target, "GET", EVENTS + version, headers=MD)
    assert resp.status == 200
    return resp.json()


def approve(sim: Simulator, *ids: str, version: str = "2020-07-01") -> Response:
    body = {"StartRequests": [{"EventId": i} for i in ids]}
    return call(sim, "POST", EVENTS + version, body, MD)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def sim(clock: FakeClock) -> Iterator[Simulator]:
    # Not conftest's: the simulator itself under test, its time moved by the test's clock.
    with Simulator(port=0, clock=clock, approval_delay=2.0) as simulator:
        yield simulator


# -- IMDS request validation ----------------------------------------------------


@pytest.mark.parametrize("headers", [{}, {"Metadata": "false"}, {"Metadata": "yes"}])
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_metadata_header_is_required(sim: Simulator, headers: dict[str, str], method: str) -> None:
    resp = call(sim, method, EVENTS + "2020-07-01", b"{}", headers)
    assert resp.status == 400
    assert resp.json() == {"error": "Bad request. Required metadata header not specified"}


def test_metadata_header_value_is_case_insensitive(sim: Simulator) -> None:
    assert call(sim, "GET", EVENTS + "2020-07-01", headers={"Metadata": "True"}).status == 200


@pytest.mark.parametrize(
    "query", ["", "?api-version=latest", "?api-version=2018-01-01", "?api-version=", "?x=1"]
)
def test_api_version_must_be_documented(sim: Simulator, query: str) -> None:
    resp = call(sim, "GET", "/metadata/scheduledevents" + query, headers=MD)
    assert resp.status == 400
    assert resp.json() == {
        "error": "Bad request. api-version is invalid or was not specified in the request. "
        "For more information refer to aka.ms/azureimds",
        "newest-versions": ["2020-07-01", "2019-08-01", "2019-04-01"],
    }


def test_idle_document(sim: Simulator) -> None:
    resp = call(sim, "GET", EVENTS + "2020-07-01", headers=MD)
    assert resp.status == 200
    assert resp.headers["content-type"] == "application/json; charset=utf-8"
    assert resp.json() == {"DocumentIncarnation": 1, "Events": []}


def test_unknown_paths_are_404_json(sim: Simulator) -> None:
    for method, path in [
        ("GET", "/"),
        ("GET", "/metadata/identity"),
        ("PUT", EVENTS + "2020-07-01"),
    ]:
        resp = call(sim, method, path, b"", MD)
        assert resp.status == 404
        assert "error" in resp.json()


# -- document shape by api-version ----------------------------------------------

BASE = {"EventId", "EventStatus", "EventType", "ResourceType", "Resources", "NotBefore"}


@pytest.mark.parametrize(
    ("version", "extra"),
    [
        ("2017-03-01", set()),
        ("2017-08-01", set()),
        ("2017-11-01", set()),
        ("2019-01-01", set()),
        ("2019-04-01", {"Description"}),
        ("2019-08-01", {"Description", "EventSource"}),
        ("2020-07-01", {"Description", "EventSource", "DurationInSeconds"}),
    ],
)
def test_fields_by_api_version(sim: Simulator, version: str, extra: set[str]) -> None:
    sim.schedule("Reboot", duration=30)
    (event,) = get_events(sim, version)["Events"]
    assert set(event) == BASE | extra
    assert event["ResourceType"] == "VirtualMachine"
    assert event["EventStatus"] == "Scheduled"


@pytest.mark.parametrize(
    ("version", "visible"),
    [
        ("2017-03-01", {"Reboot"}),
        ("2017-08-01", {"Reboot"}),
        ("2017-11-01", {"Reboot", "Preempt"}),
        ("2019-01-01", {"Reboot", "Preempt", "Terminate"}),
        ("2020-07-01", {"Reboot", "Preempt", "Terminate"}),
    ],
)
def test_newer_event_types_hidden_from_older_versions(
    sim: Simulator, version: str, visible: set[str]
) -> None:
    for event_type in ("Reboot", "Preempt", "Terminate"):
        sim.schedule(event_type)
    assert {e["EventType"] for e in get_events(sim, version)["Events"]} == visible


def test_2017_03_01_prepends_underscore_to_resource_names(sim: Simulator) -> None:
    sim.schedule("Freeze", resources=["vm0", "vm1"])
    old = get_events(sim, "2017-03-01")["Events"][0]
    assert old["Resources"] == ["_vm0", "_vm1"]
    # That preview's documentation shows NotBefore in ISO 8601.
    assert old["NotBefore"] == "2022-04-11T22:26:58Z"
    assert get_events(sim, "2017-08-01")["Events"][0]["Resources"] == ["vm0", "vm1"]


def test_event_content_and_rfc1123_not_before(sim: Simulator) -> None:
    event_id = sim.schedule("Freeze", duration=9)
    (event,) = get_events(sim)["Events"]
    assert event == {
        "EventId": event_id,
        "EventStatus": "Scheduled",
        "EventType": "Freeze",
        "ResourceType": "VirtualMachine",
        "Resources": ["vm0"],
        "NotBefore": "Mon, 11 Apr 2022 22:26:58 GMT",
        "Description": "Virtual machine is being paused because of a memory-preserving "
        "Live Migration operation.",
        "EventSource": "Platform",
        "DurationInSeconds": 9,
    }
    assert re.fullmatch(r"[0-9A-F]{8}(-[0-9A-F]{4}){3}-[0-9A-F]{12}", event_id)


def test_document_method_matches_http(sim: Simulator) -> None:
    sim.schedule("Redeploy", source="User")
    for version in API_VERSIONS:
        assert sim.document(version) == get_events(sim, version)
    with pytest.raises(ValueError, match="api-version"):
        sim.document("latest")


# -- incarnation and lifecycle (fake clock) ---------------------------------------


def test_incarnation_changes_only_with_the_events(sim: Simulator, clock: FakeClock) -> None:
    def poll() -> bytes:
        return call(sim, "GET", EVENTS + "2020-07-01", headers=MD).body

    assert poll() == poll() == b'{"DocumentIncarnation":1,"Events":[]}'
    sim.schedule("Reboot", duration=60)
    scheduled = poll()
    clock.advance(899)
    assert poll() == scheduled  # same incarnation, byte-identical body
    assert json.loads(scheduled)["DocumentIncarnation"] == 2
    clock.advance(1)
    started = json.loads(poll())
    assert started["DocumentIncarnation"] == 3
    assert started["Events"][0]["EventStatus"] == "Started"
    assert started["Events"][0]["NotBefore"] == ""
    clock.advance(60)
    assert json.loads(poll()) == {"DocumentIncarnation": 4, "Events": []}
    assert sim.incarnation == 4


def test_lifecycle_scheduled_started_gone(sim: Simulator, clock: FakeClock) -> None:
    sim.schedule("Freeze", duration=5)
    clock.advance(899.999)
    assert get_events(sim)["Events"][0]["EventStatus"] == "Scheduled"
    clock.advance(0.001)  # exactly NotBefore
    assert get_events(sim)["Events"][0]["EventStatus"] == "Started"
    clock.advance(4.9)
    assert len(get_events(sim)["Events"]) == 1
    clock.advance(0.1)
    assert get_events(sim)["Events"] == []


@pytest.mark.parametrize(
    ("event_type", "active"),
    [("Freeze", 5), ("Reboot", 120), ("Redeploy", 300), ("Preempt", 60), ("Terminate", 60)],
)
def test_default_active_time_when_duration_unknown(
    sim: Simulator, clock: FakeClock, event_type: str, active: int
) -> None:
    sim.schedule(event_type, status="Started")
    clock.advance(active - 0.01)
    assert len(get_events(sim)["Events"]) == 1
    clock.advance(0.01)
    assert get_events(sim)["Events"] == []


def test_active_overrides_duration(sim: Simulator, clock: FakeClock) -> None:
    sim.schedule("Reboot", status="Started", duration=300, active=10)
    assert get_events(sim)["Events"][0]["DurationInSeconds"] == 300
    clock.advance(10)
    assert get_events(sim)["Events"] == []


def test_approval_starts_event_after_approval_delay(sim: Simulator, clock: FakeClock) -> None:
    event_id = sim.schedule("Reboot", source="User")
    clock.advance(10)
    resp = approve(sim, event_id)
    assert (resp.status, resp.body) == (200, b"")
    assert sim.start_requests == [event_id]
    clock.advance(1.9)
    assert get_events(sim)["Events"][0]["EventStatus"] == "Scheduled"
    clock.advance(0.1)
    assert get_events(sim)["Events"][0]["EventStatus"] == "Started"
    assert sim.event(event_id)["approved"] is True


def test_unplanned_event_is_started_from_the_first_poll(sim: Simulator) -> None:
    sim.schedule("Reboot", status="Started")
    (event,) = get_events(sim)["Events"]
    assert (event["EventStatus"], event["NotBefore"]) == ("Started", "")
    assert "hardware failure" in event["Description"]


def test_start_and_complete_from_python(sim: Simulator) -> None:
    first = sim.schedule("Redeploy")
    second = sim.schedule("Reboot")
    sim.start_event(first)
    sim.complete(second)
    assert [(e["EventId"], e["EventStatus"]) for e in get_events(sim)["Events"]] == [
        (first, "Started")
    ]
    assert sim.event(second)["status"] == "Cancelled"
    sim.complete(first)
    assert sim.event(first)["status"] == "Completed"
    with pytest.raises(KeyError):
        sim.start_event("no-such-event")


def test_log_lines_for_lifecycle_and_approval(clock: FakeClock) -> None:
    lines: list[str] = []
    with Simulator(clock=clock, approval_delay=0, log=lines.append) as sim:
        event_id = sim.schedule("Reboot", source="User")
        approve(sim, event_id)
        clock.advance(500)  # started and completed without anyone polling in between
        sim.refresh()
    assert lines == [
        f"Reboot {event_id} scheduled (User), NotBefore Mon, 11 Apr 2022 22:26:58 GMT",
        f"Reboot {event_id} approved (StartRequest)",
        f"Reboot {event_id} started",
        f"Reboot {event_id} completed",
    ]


# -- StartRequests ---------------------------------------------------------------


def test_post_accepts_repeats_started_events_and_records(sim: Simulator, clock: FakeClock) -> None:
    event_id = sim.schedule("Reboot")
    assert approve(sim, event_id).status == 200
    assert approve(sim, event_id).status == 200  # already approved: still 200
    clock.advance(5)
    assert approve(sim, event_id.lower()).status == 200  # Started, and a lowercase GUID
    assert sim.start_requests == [event_id] * 3
    assert [(p.ids, p.status) for p in sim.posts] == [
        ((event_id,), 200),
        ((event_id,), 200),
        ((event_id.lower(),), 200),
    ]


@pytest.mark.parametrize(
    "body",
    [
        {"StartRequests": [{"EventId": "ABC"}], "DocumentIncarnation": 1},
        {"StartRequests": [{"EventId": "ABC"}], "DocumentIncarnation": "1"},
    ],
)
def test_post_document_incarnation_int_or_string(sim: Simulator, body: dict[str, Any]) -> None:
    sim.schedule("Reboot", event_id="ABC")
    assert call(sim, "POST", EVENTS + "2017-03-01", body, MD).status == 200


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        b"{}",
        b'{"StartRequests": {}}',
        b'{"StartRequests": []}',
        b'{"StartRequests": [{}]}',
        b'{"StartRequests": ["ABC"]}',
        b'{"StartRequests": [{"EventId": 5}]}',
        b'{"StartRequests": [{"EventId": "ABC"}], "DocumentIncarnation": {}}',
        b'{"StartRequests": [{"EventId": "ABC"}, {"EventId": "UNKNOWN"}]}',
    ],
)
def test_post_rejects_bad_bodies_and_unknown_ids(sim: Simulator, body: bytes) -> None:
    sim.schedule("Reboot", event_id="ABC")
    resp = call(sim, "POST", EVENTS + "2020-07-01", body, MD)
    assert resp.status == 400
    assert isinstance(resp.json()["error"], str)
    assert sim.start_requests == []
    assert sim.posts[-1].status == 400
    assert sim.posts[-1].error == resp.json()["error"]


def test_post_rejects_gone_and_hidden_events(sim: Simulator, clock: FakeClock) -> None:
    gone = sim.schedule("Freeze", duration=1)
    clock.advance(901)
    terminate = sim.schedule("Terminate")
    assert approve(sim, gone).status == 400
    assert approve(sim, terminate, version="2017-08-01").status == 400  # not in that document
    assert approve(sim, terminate, version="2019-01-01").status == 200


# -- notice, time scale ------------------------------------------------------------


@pytest.mark.parametrize(
    ("event_type", "minimum"),
    [("Freeze", 900), ("Reboot", 900), ("Redeploy", 600), ("Preempt", 30), ("Terminate", 300)],
)
def test_minimum_notice_is_default_and_enforced(
    sim: Simulator, clock: FakeClock, event_type: str, minimum: int
) -> None:
    event_id = sim.schedule(event_type)
    assert sim.event(event_id)["notice"] == minimum
    sim.schedule(event_type, notice=minimum + 1)
    with pytest.raises(ValueError, match="notice"):
        sim.schedule(event_type, notice=minimum - 1)


def test_a_short_notice_is_refused_pointing_to_the_time_scale(sim: Simulator) -> None:
    """Azure never gives less than the minimum, so the simulator neither: the error says
    how to wait less (a faster clock), with the scale that fits the notice asked for."""
    with pytest.raises(ValueError) as caught:
        sim.schedule("Reboot", notice=60)
    assert str(caught.value) == (
        "notice: Reboot needs at least 900 seconds of notice, got 60; for a shorter wait, run"
        " the simulator faster: --time-scale 15 (time_scale = 15 in a scenario) makes 900 s"
        " of notice pass in 60 s"
    )


def test_terminate_notice_setting(clock: FakeClock) -> None:
    sim = Simulator(clock=clock, terminate_notice=600)
    sim.schedule("Terminate", notice=600)
    with pytest.raises(ValueError, match="at least 600"):
        sim.schedule("Terminate", notice=599)
    for bad in (299, 901):
        with pytest.raises(ValueError, match="terminate_notice"):
            Simulator(terminate_notice=bad)


def test_unknown_event_type_has_no_minimum(sim: Simulator) -> None:
    assert sim.event(sim.schedule("Hibernate"))["notice"] == 900
    sim.schedule("Hibernate", notice=1)
    assert {e["EventType"] for e in get_events(sim, "2017-03-01")["Events"]} == {"Hibernate"}


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"status": "Completed"}, "status"),
        ({"duration": -2}, "duration"),
        ({"resources": []}, "resources"),
        ({"active": 0}, "active"),
        ({"status": "Started", "notice": 900}, "notice"),
        ({"at": -1}, "at"),
    ],
)
def test_schedule_rejects_bad_arguments(sim: Simulator, kwargs: dict[str, Any], key: str) -> None:
    with pytest.raises(ValueError, match=f"^{key}:"):
        sim.schedule("Reboot", **kwargs)


def test_time_scale(clock: FakeClock) -> None:
    with Simulator(clock=clock, time_scale=900) as sim:
        sim.schedule("Reboot", duration=120)
        (event,) = get_events(sim)["Events"]
        # NotBefore is real wall-clock time: 15 minutes of notice in 1 s.
        assert event["NotBefore"] == "Mon, 11 Apr 2022 22:11:59 GMT"
        assert event["DurationInSeconds"] == 120  # reported unscaled
        clock.advance(1)
        assert get_events(sim)["Events"][0]["EventStatus"] == "Started"
        clock.advance(120 / 900)
        assert get_events(sim)["Events"] == []


def test_time_scale_applies_to_approval_delay_and_offsets(clock: FakeClock) -> None:
    with Simulator(clock=clock, time_scale=10, approval_delay=20) as sim:
        event_id = sim.schedule("Reboot", at=100)
        assert get_events(sim)["Events"] == []
        clock.advance(10)
        assert approve(sim, event_id).status == 200
        clock.advance(2)
        assert get_events(sim)["Events"][0]["EventStatus"] == "Started"


# -- faults ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "status", "status_arg"),
    [("500", 500, None), ("429", 429, None), ("status", 503, 503), ("status", 404, 404)],
)
def test_error_faults(sim: Simulator, kind: str, status: int, status_arg: int | None) -> None:
    sim.inject(kind, count=2, status=status_arg)
    for _ in range(2):
        resp = call(sim, "GET", EVENTS + "2020-07-01", headers=MD)
        assert resp.status == status
        assert "error" in resp.json()
    if kind == "429":
        assert resp.headers["retry-after"] == "1"
        assert resp.json() == {"error": "Too many requests"}
    assert get_events(sim) == {"DocumentIncarnation": 1, "Events": []}


def test_malformed_and_html_faults(sim: Simulator) -> None:
    sim.inject("malformed")
    sim.inject("html")
    bad = call(sim, "GET", EVENTS + "2020-07-01", headers=MD)
    assert bad.status == 200
    assert bad.headers["content-type"].startswith("application/json")
    with pytest.raises(json.JSONDecodeError):
        bad.json()
    page = call(sim, "GET", EVENTS + "2020-07-01", headers=MD)
    assert page.status == 200
    assert page.headers["content-type"].startswith("text/html")
    assert page.body.lstrip().startswith(b"<!DOCTYPE html>")


def test_reset_and_hang_faults(sim: Simulator) -> None:
    sim.inject("reset")
    with pytest.raises(ConnectionResetError) as caught:
        call(sim, "GET", EVENTS + "2020-07-01", headers=MD)
    assert not isinstance(caught.value, http.client.RemoteDisconnected)  # a real RST
    sim.inject("hang", seconds=0.2)
    began = time.monotonic()
    with pytest.raises(http.client.RemoteDisconnected):
        call(sim, "POST", EVENTS + "2020-07-01", {"StartRequests": []}, MD)
    assert time.monotonic() - began >= 0.2
    assert get_events(sim)["Events"] == []


def test_hang_after_carries_the_post_out_and_never_answers(
    sim: Simulator, clock: FakeClock
) -> None:
    event_id = sim.schedule("Reboot", source="User")
    sim.inject("hang_after", seconds=0.2)
    began = time.monotonic()
    with pytest.raises(http.client.RemoteDisconnected):  # IMDS took it; its answer is lost
        call(sim, "POST", EVENTS + "2020-07-01", {"StartRequests": [{"EventId": event_id}]}, MD)
    assert time.monotonic() - began >= 0.2
    assert sim.start_requests == [event_id]
    clock.advance(2.0)  # the simulator's approval_delay
    assert get_events(sim)["Events"][0]["EventStatus"] == "Started"


def test_stop_interrupts_a_hang(clock: FakeClock) -> None:
    sim = Simulator(clock=clock).start()
    sim.inject("hang")  # 30 s by default
    errors: list[BaseException] = []

    def client() -> None:
        try:
            call(sim, "GET", EVENTS + "2020-07-01", headers=MD)
        except (ConnectionError, TimeoutError) as exc:
            errors.append(exc)

    thread = threading.Thread(target=client)
    thread.start()
    time.sleep(0.1)
    began = time.monotonic()
    sim.stop()
    thread.join(timeout=5)
    assert time.monotonic() - began < 2
    assert not thread.is_alive()
    assert errors


def test_slow_first_only_delays_the_next_events_get(sim: Simulator) -> None:
    sim.inject("slow_first", seconds=0.3)
    began = time.monotonic()
    assert (
        call(sim, "GET", "/metadata/instance/compute?api-version=2021-02-01", None, MD).status
        == 200
    )
    assert time.monotonic() - began < 0.3
    began = time.monotonic()
    assert get_events(sim) == {"DocumentIncarnation": 1, "Events": []}
    assert time.monotonic() - began >= 0.3
    began = time.monotonic()
    get_events(sim)
    assert time.monotonic() - began < 0.3
    assert sim.faults == []


def test_faults_do_not_touch_the_control_api_and_can_be_cleared(sim: Simulator) -> None:
    sim.inject("500", count=5)
    assert call(sim, "GET", "/simulator/state").status == 200
    assert sim.clear_faults() == 1
    assert get_events(sim)["DocumentIncarnation"] == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("nope",), "kind"),
        (("500", 0), "count"),
        (("status",), "status"),
        (("status", 1, None, 100), "status"),
        (("500", 1, None, 500), "status"),
        (("hang", 1, -1), "seconds"),
    ],
)
def test_inject_validates(sim: Simulator, args: tuple[Any, ...], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}:"):
        sim.inject(*args)


def test_rate_limit(clock: FakeClock) -> None:
    with Simulator(clock=clock, rate_limit=5) as sim:
        statuses = [call(sim, "GET", EVENTS + "2020-07-01", headers=MD).status for _ in range(7)]
        assert statuses == [200] * 5 + [429] * 2
        clock.advance(1)
        assert call(sim, "GET", EVENTS + "2020-07-01", headers=MD).status == 200


# -- HTTP/1.1 keep-alive -------------------------------------------------------------


def test_keep_alive_serves_many_requests_on_one_connection(sim: Simulator) -> None:
    event_id = sim.schedule("Reboot")
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=5)
    try:
        assert get_events(conn)["Events"][0]["EventId"] == event_id
        assert call(conn, "GET", EVENTS + "nope", headers=MD).status == 400
        assert call(conn, "POST", EVENTS + "2020-07-01", b"{bad", MD).status == 400
        body = {"StartRequests": [{"EventId": event_id}]}
        assert call(conn, "POST", EVENTS + "2020-07-01", body, MD).status == 200
        assert call(conn, "GET", "/nowhere").status == 404
        assert get_events(conn)["DocumentIncarnation"] == 2
    finally:
        conn.close()
    assert len({r.client for r in sim.requests}) == 1
    assert [r.status for r in sim.requests] == [200, 400, 400, 200, 404, 200]


def test_stop_closes_idle_keep_alive_connections(clock: FakeClock) -> None:
    sim = Simulator(clock=clock).start()
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=5)
    try:
        get_events(conn)
        sim.stop()
        with pytest.raises(ConnectionError):
            get_events(conn)
    finally:
        conn.close()


# -- instance metadata ---------------------------------------------------------------


@pytest.mark.parametrize("version", ["2017-04-02", "2019-06-01", "2021-02-01", "2023-07-01"])
def test_compute_endpoint(clock: FakeClock, version: str) -> None:
    with Simulator(clock=clock, vm_name="web-7") as sim:
        resp = call(sim, "GET", f"/metadata/instance/compute?api-version={version}", None, MD)
        assert resp.status == 200
        compute = resp.json()
        assert compute["name"] == "web-7"
        assert compute["vmScaleSetName"] == ""
        for key in ("vmId", "location", "vmSize", "osType", "resourceGroupName", "subscriptionId"):
            assert isinstance(compute[key], str)
            assert compute[key]
        assert compute["azEnvironment"] == "AzurePublicCloud"
        whole = call(sim, "GET", f"/metadata/instance?api-version={version}", None, MD).json()
        assert whole["compute"] == compute


def test_compute_endpoint_validates_header_and_version(sim: Simulator) -> None:
    path = "/metadata/instance/compute?api-version="
    assert call(sim, "GET", path + "2021-02-01").status == 400
    resp = call(sim, "GET", path + "latest", None, MD)
    assert resp.status == 400
    assert "api-version is invalid" in resp.json()["error"]
    assert len(resp.json()["newest-versions"]) == 3


# -- control API ----------------------------------------------------------------------


def test_control_api(sim: Simulator, clock: FakeClock) -> None:
    created = call(
        sim,
        "POST",
        "/simulator/events",
        {"type": "Redeploy", "source": "User", "resources": ["vm0", "vm1"], "duration": 30},
    )
    assert created.status == 201
    event = created.json()
    assert (event["type"], event["status"], event["approved"]) == ("Redeploy", "Scheduled", False)
    assert event["not_before"] == "2022-04-11T22:21:58Z"
    event_id = event["id"]
    approve(sim, event_id)

    state = call(sim, "GET", "/simulator/state").json()
    assert state["incarnation"] == 2
    assert [e["id"] for e in state["events"]] == [event_id]
    assert state["events"][0]["approved"] is True
    assert state["start_requests"] == [event_id]
    assert state["posts"][0]["ids"] == [event_id]
    assert state["posts"][0]["status"] == 200

    started = call(sim, "POST", f"/simulator/events/{event_id}/start")
    assert (started.status, started.json()["status"]) == (200, "Started")
    done = call(sim, "POST", f"/simulator/events/{event_id}/complete")
    assert (done.status, done.json()["status"]) == (200, "Completed")
    assert get_events(sim)["Events"] == []
    assert call(sim, "POST", "/simulator/events/NOPE/start").status == 404
    assert call(sim, "POST", "/simulator/events/NOPE/complete").status == 404


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ({"type": "Reboot", "colour": "red"}, "colour"),
        ({"type": "Reboot", "notice": 60}, "notice"),
        ({"type": 5}, "type"),
        ({}, "type"),
        ({"type": "Reboot", "duration": "long"}, "duration"),
    ],
)
def test_control_api_rejects_bad_events(sim: Simulator, body: dict[str, Any], key: str) -> None:
    resp = call(sim, "POST", "/simulator/events", body)
    assert resp.status == 400
    assert resp.json()["error"].startswith(f"{key}:")


def test_control_api_faults(sim: Simulator) -> None:
    assert call(sim, "POST", "/simulator/faults", {"kind": "500", "count": 2}).status == 201
    assert call(sim, "POST", "/simulator/faults", {"kind": "bogus"}).status == 400
    assert call(sim, "POST", "/simulator/faults", b"[1]").status == 400
    assert call(sim, "GET", "/simulator/faults").json()[0]["count"] == 2
    assert call(sim, "GET", EVENTS + "2020-07-01", headers=MD).status == 500
    assert call(sim, "DELETE", "/simulator/faults").json() == {"cleared": 1}
    assert call(sim, "GET", EVENTS + "2020-07-01", headers=MD).status == 200
    assert call(sim, "PUT", "/simulator/faults").status == 405
    assert call(sim, "GET", "/simulator/nothing").status == 404
    assert call(sim, "GET", "/simulatorstate").status == 404


# -- scenarios -------------------------------------------------------------------------

SCENARIO = """
vm_name = "db-1"
time_scale = 60
terminate_notice = 600
approval_delay = 1

[[events]]
at = 0
type = "Freeze"
duration = 5

[[events]]
at = 120
type = "Terminate"
source = "User"
notice = 600
id = "T-1"
"""


def test_scenario_file_loads_and_schedules_at_offsets(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO)
    scenario = read_scenario(path)
    assert scenario.settings() == {
        "vm_name": "db-1",
        "time_scale": 60.0,
        "terminate_notice": 600.0,
        "approval_delay": 1.0,
    }
    with Simulator(clock=clock, **scenario.settings()) as sim:
        ids = sim.load_scenario(path)
        assert ids[1] == "T-1"
        (freeze,) = get_events(sim)["Events"]
        assert freeze["Resources"] == ["db-1"]
        clock.advance(2)  # 120 scaled seconds
        assert [e["EventId"] for e in get_events(sim)["Events"]] == [ids[0], "T-1"]


def test_scenario_json_by_extension(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"events": [{"type": "Preempt", "at": 5}]}))
    (event,) = read_scenario(path).events
    assert (event.event_type, event.at) == ("Preempt", 5.0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("colour = 1", "colour: unknown key"),
        ("time_scale = 0", "time_scale: must be positive"),
        ("terminate_notice = 100", "terminate_notice"),
        ('vm_name = ""', "vm_name"),
        ("events = 3", "events: must be a list"),
        ('[[events]]\ntype = "Reboot"\ncolour = 1', r"events\[0\]\.colour: unknown key"),
        ('[[events]]\ntype = "Reboot"\n[[events]]\ntype = 4', r"events\[1\]\.type"),
        ('[[events]]\ntype = "Reboot"\nat = "soon"', r"events\[0\]\.at: must be a number"),
        ('[[events]]\ntype = "Reboot"\nnotice = 60', r"events\[0\]\.notice: Reboot needs"),
        ('[[events]]\ntype = "Terminate"\nnotice = 200', r"events\[0\]\.notice: Terminate"),
        ('[[events]]\ntype = "Reboot"\nresources = "vm0"', r"events\[0\]\.resources"),
        ('[[events]]\nsource = "User"', r"events\[0\]\.type: missing"),
        ('[[events]]\ntype="A"\nid="X"\n[[events]]\ntype="B"\nid="x"', r"events\[1\]\.id"),
        ("this is = not toml", "invalid TOML"),
    ],
)
def test_scenario_validation(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=f"scenario {re.escape(str(path))}: .*{message}"):
        read_scenario(path)


def test_scenario_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot read"):
        read_scenario(tmp_path / "absent.toml")


def test_load_scenario_checks_this_simulators_terminate_notice(
    tmp_path: Path, clock: FakeClock
) -> None:
    path = tmp_path / "s.toml"
    path.write_text('[[events]]\ntype = "Reboot"\n[[events]]\ntype = "Terminate"\nnotice = 300')
    sim = Simulator(clock=clock, terminate_notice=900)
    with pytest.raises(ValueError, match=r"events\[1\]\.notice"):
        sim.load_scenario(path)
    assert sim.snapshot()["events"] == []  # nothing half-loaded


def test_demo_scenario_plays_out_within_a_minute_at_time_scale_60(clock: FakeClock) -> None:
    scenario = demo_scenario()
    assert [e.event_type for e in scenario.events] == ["Freeze", "Redeploy", "Reboot", "Preempt"]
    with Simulator(clock=clock, time_scale=60) as sim:
        sim.load_scenario(scenario)
        seen: set[tuple[str, str]] = set()
        for _ in range(60 * 4):
            seen |= {(e["EventType"], e["EventStatus"]) for e in get_events(sim)["Events"]}
            clock.advance(0.25)
        assert get_events(sim)["Events"] == []
    assert seen == {
        (t, s)
        for t in ("Freeze", "Redeploy", "Reboot", "Preempt")
        for s in (
            "Scheduled",
            "Started",
        )
    }


# -- serve() -------------------------------------------------------------------------------


class Capture(io.StringIO):
    def wait_for(self, pattern: str, timeout: float = 5) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.getvalue())
            if found:
                return found
            time.sleep(0.01)
        raise AssertionError(f"{pattern!r} not in {self.getvalue()!r}")


def test_serve_prints_listening_line_and_lifecycle(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('[[events]]\ntype = "Preempt"\nduration = 5')
    out, stop = Capture(), threading.Event()
    result: list[int] = []
    thread = threading.Thread(
        target=lambda: result.append(
            serve("127.0.0.1", 0, path, time_scale=1000, out=out, stop=stop)
        )
    )
    thread.start()
    try:
        port = int(out.wait_for(r"listening on http://127\.0\.0\.1:(\d+) \(time scale 1000\)")[1])
        assert out.getvalue().startswith("sebridge simulator listening on")
        sim_like = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        sim_like.request("GET", EVENTS + "2020-07-01", headers=MD)
        assert sim_like.getresponse().status == 200
        sim_like.close()
        out.wait_for(r"\d\d:\d\d:\d\d Preempt [0-9A-F-]{36} completed")
    finally:
        stop.set()
        thread.join(timeout=5)
    assert result == [0]
    assert "scheduled (Platform), NotBefore" in out.getvalue()


def test_serve_rejects_a_bad_scenario(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[[events]]\ntype = "Reboot"\nnotice = 1')
    out, err = io.StringIO(), io.StringIO()
    assert serve("127.0.0.1", 0, path, out=out, err=err) == 2
    assert "events[0].notice" in err.getvalue()
    assert out.getvalue() == ""


# -- independence -------------------------------------------------------------------------


def test_simulator_imports_nothing_else_from_sebridge() -> None:
    import sebridge.imds.simulator

    package = Path(sebridge.imds.simulator.__file__).parent
    for source in package.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("sebridge.") or node.module.startswith(
                    "sebridge.imds.simulator"
                ), f"{source.name} imports {node.module}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith("sebridge"), source.name


def test_start_twice_is_an_error(sim: Simulator) -> None:
    with pytest.raises(RuntimeError):
        sim.start()
    assert sim.url == f"http://127.0.0.1:{sim.port}"
