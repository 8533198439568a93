"""Jira end to end: the daemon in this process, the IMDS simulator and the fake Jira on sockets.

`build_daemon(config, serve=True)` builds the Jira sink and the status watcher from a
Config; `daemon.run()` polls the simulator on a thread. A person moving an issue is the
fake's `move()`. Outcomes are awaited with bounded polls, never sleeps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fakes.jira import FakeJira
from helpers import RunnerThread, wait_until
from sebridge.cli.runtime import build_runner
from sebridge.engine.daemon import Daemon
from sebridge.engine.runner import Runner
from sebridge.imds.simulator import Simulator
from sebridge.integrations.jira.watcher import actor_of
from sebridge.integrations.registry import config_from_mapping as from_mapping

POLL = 0.2


pytestmark = pytest.mark.usefixtures("hermetic")


def jira_section(fake: FakeJira, wrong_credentials: bool = False, **more: Any) -> dict[str, Any]:
    prefix = "wrong-" if wrong_credentials else ""
    auth: dict[str, Any] = (
        {"email": fake.email, "api_token": prefix + fake.token}
        if fake.flavour == "cloud"
        else {"pat": prefix + fake.pat}
    )
    return {
        "url": fake.url,
        "project": "OPS",
        "approve_status": "Approved",
        "poll_interval": POLL,
        **auth,
        **more,
    }


@dataclass
class Bridge:
    jira: FakeJira
    sim: Simulator
    runner: Runner
    _running: RunnerThread = field(init=False)

    def __post_init__(self) -> None:
        self._running = RunnerThread(self.runner)

    @property
    def daemon(self) -> Daemon:
        return self.runner.daemon

    def start(self) -> Bridge:
        self._running.start()
        return self

    def stop(self) -> None:
        self._running.stop()

    def issue(self, event_id: str, timeout: float = 10.0) -> dict[str, Any]:
        found = wait_until(
            lambda: self.jira.issues_of(event_id), timeout, message=f"the issue of {event_id}"
        )
        assert len(found) == 1, found
        return found[0]

    def wait_comment(self, key: str, start: str, timeout: float = 10.0) -> list[str]:
        wait_until(
            lambda: any(c.startswith(start) for c in self.jira.comments(key)),
            timeout,
            message=lambda: f"a comment {start!r} on {key}; has {self.jira.comments(key)}",
        )
        return self.jira.comments(key)

    def searches(self) -> int:
        return len(self.jira.calls_to("GET", "search/jql")) + len(
            self.jira.calls_to("GET", "search")
        )

    def polls(self, count: int) -> None:
        start = len(self.sim.requests)
        wait_until(lambda: len(self.sim.requests) >= start + count, 10, message="more polls")


@pytest.fixture
def make_bridge(jira: FakeJira, sim: Simulator, tmp_path: Path) -> Iterator[Callable[..., Bridge]]:
    bridges: list[Bridge] = []

    def make(**more: Any) -> Bridge:
        data = {
            "imds": {"endpoint": sim.url, "poll_interval": POLL, "vm_name": "vm0"},
            "store": {"url": f"sqlite:///{tmp_path / 'state.db'}"},
            "console": {"enabled": False},
            "dispatch": {"shutdown_grace_seconds": 1.0},
            "jira": jira_section(jira, **more),
        }
        bridge = Bridge(jira, sim, build_runner(from_mapping(data, environ={})))
        bridges.append(bridge)
        return bridge.start()

    yield make
    for bridge in bridges:
        bridge.stop()


@pytest.mark.slow
def test_ticket_approved_by_moving_it_then_started_and_resolved(
    make_bridge: Callable[..., Bridge],
) -> None:
    bridge = make_bridge()
    sim, jira = bridge.sim, bridge.jira
    event_id = sim.schedule("Reboot", resources=["vm0", "vm1"], description="Host update")

    issue = bridge.issue(event_id)
    key = issue["key"]
    assert issue["labels"] == ["sebridge", f"sebridge-{event_id.lower()}"]
    assert "Resources: vm0 (this VM), vm1" in issue["description"]
    assert 'by moving this issue to "Approved"' in issue["description"]
    assert sim.start_requests == []

    jira.move(key, "Approved", by="Alice Example")

    wait_until(lambda: sim.start_requests, 10, message="the StartRequest at IMDS")
    assert sim.start_requests == [event_id]
    comments = bridge.wait_comment(key, "Approved by Alice Example via jira")
    assert len(comments) == 1

    sim.start_event(event_id)
    bridge.wait_comment(key, "Started (approved by Alice Example)")
    sim.complete(event_id)
    bridge.wait_comment(key, "Completed")
    wait_until(lambda: jira.issues[key]["status"] == "Done", 10, message="the issue Done")

    # The event is over: no open event, so the watcher asks Jira nothing more.
    searches = bridge.searches()
    bridge.polls(10)
    assert bridge.searches() == searches
    assert len(jira.issues) == 1 and sim.start_requests == [event_id]
    assert len(jira.comments(key)) == 3
    # serverInfo told the library which search this Jira has (Cloud removed /search: 410).
    searched = {c.path for c in jira.calls if c.path.startswith("search")}
    assert searched == ({"search/jql"} if jira.flavour == "cloud" else {"search"})


def test_actor_is_the_issue_key_without_a_changelog_author(
    make_bridge: Callable[..., Bridge],
) -> None:
    bridge = make_bridge()
    event_id = bridge.sim.schedule("Redeploy")
    key = bridge.issue(event_id)["key"]
    bridge.jira.move(key, "Approved", by=None)
    bridge.wait_comment(key, f"Approved by {key} via jira")
    assert bridge.sim.start_requests == [event_id]


def test_started_event_is_refused_once(make_bridge: Callable[..., Bridge]) -> None:
    bridge = make_bridge()
    event_id = bridge.sim.schedule("Redeploy")
    key = bridge.issue(event_id)["key"]
    bridge.sim.start_event(event_id)
    bridge.wait_comment(key, "Started")
    bridge.jira.move(key, "Approved")
    comments = bridge.wait_comment(key, "Not approved: event")
    assert "has already started: nothing to approve" in comments[-1]
    searches = bridge.searches()
    wait_until(lambda: bridge.searches() >= searches + 3, 10, message="more watcher rounds")
    refusals = [c for c in bridge.jira.comments(key) if c.startswith("Not approved")]
    assert len(refusals) == 1
    assert bridge.sim.start_requests == []


@pytest.mark.slow
def test_no_search_while_no_event_is_open(make_bridge: Callable[..., Bridge]) -> None:
    bridge = make_bridge()
    bridge.polls(15)  # 3 s of polling, 15 watcher intervals
    assert bridge.jira.calls == []  # not even serverInfo: the client connects on first use


def test_one_search_for_all_open_events(make_bridge: Callable[..., Bridge]) -> None:
    bridge = make_bridge()
    ids = [bridge.sim.schedule("Reboot") for _ in range(3)]
    keys = [bridge.issue(i)["key"] for i in ids]
    bridge.jira.move(keys[0], "Approved")
    bridge.jira.move(keys[2], "Approved")
    wait_until(lambda: len(bridge.sim.start_requests) == 2, 10, message="two StartRequests")
    assert sorted(bridge.sim.start_requests) == sorted([ids[0], ids[2]])
    # Every watcher search names every open event's label in one query.
    search = bridge.jira.calls_to("GET", "search/jql") or bridge.jira.calls_to("GET", "search")
    watcher = [c for c in search if "status" in c.query.get("jql", [""])[0]]
    assert watcher and all(
        all(f"sebridge-{i.lower()}" in c.query["jql"][0] for i in ids) for c in watcher[:1]
    )


@pytest.mark.slow
def test_lost_answer_on_create_through_the_dispatcher_makes_one_issue(
    make_bridge: Callable[..., Bridge],
) -> None:
    """Jira created the issue but answered 503; Cloud's search sees it only 2 s later."""
    bridge = make_bridge()
    bridge.jira.index_lag = 2.0
    bridge.jira.fail("POST", "issue", 503, after=True)
    event_id = bridge.sim.schedule("Reboot")
    wait_until(
        lambda: bridge.daemon.store.outbox.pending_count() == 0 and bridge.jira.issues,
        20,
        message="the retried delivery",
    )
    assert len(bridge.jira.issues_of(event_id)) == 1
    assert len(bridge.jira.calls_to("POST", "issue")) == 1


def test_bad_credentials_are_logged_without_the_token(
    make_bridge: Callable[..., Bridge], caplog: pytest.LogCaptureFixture
) -> None:
    bridge = make_bridge(wrong_credentials=True)
    fake = bridge.jira
    bridge.sim.schedule("Reboot")
    wait_until(
        lambda: any("refused the credentials" in r.getMessage() for r in caplog.records),
        10,
        message="the delivery error in the log",
    )
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert fake.token not in text and fake.pat not in text
    assert fake.issues == {}


def test_watcher_reads_every_page_of_the_search(make_bridge: Callable[..., Bridge]) -> None:
    """Cloud pages with nextPageToken, Data Center with startAt: both read to the end."""
    bridge = make_bridge()
    bridge.jira.page_size = 2
    ids = [bridge.sim.schedule("Reboot") for _ in range(5)]
    keys = [bridge.issue(i)["key"] for i in ids]
    for key in keys:
        bridge.jira.move(key, "Approved")
    wait_until(lambda: len(bridge.sim.start_requests) == 5, 15, message="five StartRequests")
    assert sorted(bridge.sim.start_requests) == sorted(ids)
    paged = "nextPageToken" if bridge.jira.flavour == "cloud" else "startAt"
    assert any(
        int((c.query.get(paged) or ["0"])[0]) > 0
        for c in bridge.jira.calls
        if c.path.startswith("search")
    )


def test_actor_is_who_last_moved_it_to_the_status() -> None:
    issue = {
        "key": "OPS-7",
        "changelog": {
            "histories": [
                {
                    "created": "2026-11-23T10:00:00.000+0000",
                    "author": {"displayName": "Bob"},
                    "items": [{"field": "status", "toString": "Approved"}],
                },
                {
                    "created": "2026-11-23T10:05:00.000+0000",
                    "author": {"displayName": "Carol"},
                    "items": [{"field": "status", "toString": "To Do"}],
                },
                {
                    "created": "2026-11-23T10:09:00.000+0000",
                    "author": {"name": "alice"},
                    "items": [
                        {"field": "labels", "toString": "x"},
                        {"field": "status", "toString": "approved"},
                    ],
                },
            ]
        },
    }
    assert actor_of(issue, "Approved") == "alice"
    assert actor_of(issue, "Done") == "OPS-7"
    assert actor_of({"key": "OPS-8"}, "Approved") == "OPS-8"


def test_watcher_survives_a_failing_search_and_says_so_once(
    make_bridge: Callable[..., Bridge], caplog: pytest.LogCaptureFixture
) -> None:
    bridge = make_bridge()
    event_id = bridge.sim.schedule("Reboot")
    key = bridge.issue(event_id)["key"]
    search = "search/jql" if bridge.jira.flavour == "cloud" else "search"
    for _ in range(3):
        bridge.jira.fail("GET", search, 503)
    bridge.jira.move(key, "Approved")
    wait_until(lambda: bridge.sim.start_requests, 15, message="the StartRequest after the outage")
    warnings = [r for r in caplog.records if "Jira is unavailable (HTTP 503)" in r.getMessage()]
    assert len(warnings) == 1
