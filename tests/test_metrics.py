"""The metrics' parts in one process: label sets, counting after commit, a bounded scrape.

The scrape of a running daemon, through every sink, is tests/test_metrics_process.py.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sebridge.cli.assembly import compose_daemon
from sebridge.config.loader import from_mapping
from sebridge.engine.metrics import REQUEST_OUTCOMES, Metrics
from sebridge.imds import ImdsClient
from sebridge.imds.simulator import Simulator
from sebridge.integrations.jsonl.sink import JsonlSink
from sebridge.model import Document, ScheduledEvent, Transition, TransitionKind
from sebridge.policy.compile import build_policy
from sebridge.store import Store
from sebridge.store.tallies import Tallies, read_tallies
from sebridge.web.metrics_export import registry_of
from sebridge.web.store_gauges import StoreGauges

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def event(event_id: str) -> ScheduledEvent:
    return ScheduledEvent(
        event_id=event_id,
        event_type="Reboot",
        resource_type="VirtualMachine",
        resources=("vm0",),
        status="Scheduled",
        not_before=NOW,
    )


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(registry_of(metrics)).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_transitions_are_counted_once_committed_and_not_after_a_rollback(
    make_store: Callable[..., Store],
) -> None:
    store = make_store(agent="vm0")
    metrics = Metrics(["jsonl"])
    store.transitions.on_recorded(metrics.transition_recorded)
    scheduled = Transition(TransitionKind.SCHEDULED, event("A"), NOW)
    with pytest.raises(RuntimeError), store.db.transaction():
        store.documents.apply(Document(1, (event("A"),)), [(scheduled, ["jsonl"])], NOW)
        raise RuntimeError("the tick failed after the insert")
    assert samples(metrics)[("sebridge_transitions_total", (("kind", "scheduled"),))] == 0
    store.documents.apply(Document(1, (event("A"),)), [(scheduled, ["jsonl"])], NOW)
    assert samples(metrics)[("sebridge_transitions_total", (("kind", "scheduled"),))] == 1
    # The same transition again (another agent's, or a repeated tick) is not recorded twice.
    store.documents.apply(Document(2, (event("A"),)), [(scheduled, ["jsonl"])], NOW)
    assert samples(metrics)[("sebridge_transitions_total", (("kind", "scheduled"),))] == 1


def test_store_figures_are_read_in_one_statement(make_store: Callable[..., Store]) -> None:
    store = make_store(agent="vm0")
    transitions = [
        (Transition(TransitionKind.SCHEDULED, event(i), NOW), ["jsonl", "slack"]) for i in "AB"
    ]
    store.documents.apply(Document(1, (event("A"), event("B"))), transitions, NOW)
    tallies = read_tallies(store.db, ["jsonl"])
    assert tallies.events == {"scheduled": 2}
    assert tallies.pending == {"jsonl": 2}  # slack's rows are not this agent's sinks'


@pytest.mark.parametrize(
    ("call", "args"),
    [
        ("hook_finished", ("deploy", "succeeded")),
        ("hook_finished", ("prepare", "exit 3")),
        ("polled", ("weird",)),
        ("approval_settled", ("slack", "maybe")),
        ("transition_recorded", ("hook-1234",)),
        ("delivered", ("jira-OPS-12", 1.0)),
    ],
)
def test_a_label_value_outside_its_set_is_refused(call: str, args: tuple[object, ...]) -> None:
    metrics = Metrics(["jira"])
    with pytest.raises(ValueError):
        getattr(metrics, call)(*args)


def test_a_channel_outside_the_set_is_counted_as_other() -> None:
    metrics = Metrics(["jsonl"])
    metrics.approval_settled("webhook-U12345", "approved")
    found = samples(metrics)
    assert found[("sebridge_approvals_total", (("outcome", "approved"), ("via", "other")))] == 1
    assert not any("webhook" in v for _, labels in found for _, v in labels)


def test_hooks_are_counted_by_stage_and_outcome() -> None:
    metrics = Metrics()
    metrics.hook_finished("prepare", "timeout")
    metrics.hook_finished("prepare", "timeout")
    metrics.hook_finished("recover", "succeeded")
    found = samples(metrics)
    key = "sebridge_hooks_total"
    assert found[(key, (("outcome", "timeout"), ("stage", "prepare")))] == 2
    assert found[(key, (("outcome", "succeeded"), ("stage", "recover")))] == 1
    assert found[(key, (("outcome", "failed"), ("stage", "prepare")))] == 0


def test_the_poll_threads_unchanged_polls_are_shown_with_the_others() -> None:
    """Daemon.quiet counts its unchanged polls without the lock (Metrics.quiet_poll); the
    scrape shows them in the one unchanged sample, and the last answer's Unix time."""
    metrics = Metrics(["jsonl"])
    assert samples(metrics)[("sebridge_imds_last_success_timestamp_seconds", ())] == 0
    metrics.quiet_poll(NOW)
    metrics.quiet_poll(NOW)
    metrics.polled("unchanged", NOW - timedelta(seconds=1))
    metrics.polled("changed", NOW)
    found = samples(metrics)
    assert found[("sebridge_imds_polls_total", (("outcome", "unchanged"),))] == 3
    assert found[("sebridge_imds_polls_total", (("outcome", "changed"),))] == 1
    assert found[("sebridge_imds_polls_total", (("outcome", "error"),))] == 0
    assert found[("sebridge_imds_last_success_timestamp_seconds", ())] == NOW.timestamp()


def test_two_daemons_in_one_process_count_apart() -> None:
    first, second = Metrics(["jsonl"]), Metrics(["jsonl"])
    first.polled("unchanged")
    assert samples(first)[("sebridge_imds_polls_total", (("outcome", "unchanged"),))] == 1
    assert samples(second)[("sebridge_imds_polls_total", (("outcome", "unchanged"),))] == 0


def test_a_scrape_does_not_wait_for_a_frozen_store(make_store: Callable[..., Store]) -> None:
    """The store's read does not end (as on a frozen database, whose statement waits for
    its deadline): the scrape answers without the store's figures, and however many
    scrapes come meanwhile, one read waits on the store."""
    store = make_store(agent="vm0")
    metrics = Metrics(["jsonl"])
    reads = []
    holding, release = threading.Event(), threading.Event()

    def read() -> Tallies:
        reads.append(1)
        holding.set()
        release.wait(30)
        return read_tallies(store.db, ["jsonl"])

    registry_of(metrics).register(StoreGauges(read, ["jsonl"], wait=0.05))
    try:
        samples(metrics)  # the first scrape starts the read, which hangs
        assert holding.wait(10)
        for _ in range(3):
            found = samples(metrics)
            assert not any(name == "sebridge_events" for name, _ in found)
            assert found[("sebridge_imds_polls_total", (("outcome", "changed"),))] == 0
        assert len(reads) == 1
    finally:
        release.set()
    store.documents.apply(
        Document(1, (event("A"),)),
        [(Transition(TransitionKind.SCHEDULED, event("A"), NOW), ["jsonl"])],
        NOW,
    )
    found = {}
    for _ in range(100):  # the stuck read has ended; a later scrape reads afresh
        found = samples(metrics)
        if found.get(("sebridge_events", (("state", "scheduled"),))) == 1:
            break
    assert found[("sebridge_events", (("state", "scheduled"),))] == 1
    assert found[("sebridge_outbox_pending", (("sink", "jsonl"),))] == 1


def test_hook_runs_and_held_approvals_are_counted(sim: Simulator, tmp_path: Path) -> None:
    """Hooks as real processes through the daemon's own path (tick without threads): one
    succeeds, one fails, one outlives its timeout; the policy's approvals end approved,
    held and held."""

    def hook(body: str) -> list[str]:
        path = tmp_path / f"hook{len(list(tmp_path.glob('hook*.py')))}.py"
        path.write_text(f"import sys, time\n{body}\n")
        return [sys.executable, str(path)]

    config = from_mapping(
        {
            "policy": {
                "rules": [
                    {"event_types": ["Reboot"], "action": "approve", "prepare": ["ok"]},
                    {"event_types": ["Redeploy"], "action": "approve", "prepare": ["fails"]},
                    {"event_types": ["Freeze"], "action": "approve", "prepare": ["slow"]},
                ]
            },
            "hooks": {
                "ok": {"command": hook("pass")},
                "fails": {"command": hook("sys.exit(1)")},
                "slow": {"command": hook("time.sleep(30)"), "timeout": 0.5},
            },
        }
    )
    daemon = compose_daemon(
        ImdsClient(sim.url, timeout=2.0, first_timeout=5.0, sleep=lambda s: None),
        Store(f"sqlite:///{tmp_path}/state.db", agent="vm0"),
        {"jsonl": JsonlSink(str(tmp_path / "events.jsonl"))},
        policy=build_policy(config.policy),
        vm_name="vm0",
        hooks=config.hooks,
    )
    try:
        for event_type in ("Reboot", "Redeploy", "Freeze"):
            sim.schedule(event_type)
        for _ in range(3):
            daemon.tick()
            daemon.parts.dispatcher.deliver_due("jsonl")
        found = samples(daemon.metrics)
    finally:
        daemon.imds.close()
        daemon.store.close()
    hooks = "sebridge_hooks_total"
    for outcome in ("succeeded", "failed", "timeout"):
        assert found[(hooks, (("outcome", outcome), ("stage", "prepare")))] == 1, outcome
    approvals = "sebridge_approvals_total"
    assert found[(approvals, (("outcome", "approved"), ("via", "policy")))] == 1
    assert found[(approvals, (("outcome", "held"), ("via", "policy")))] == 2
    assert found[("sebridge_transitions_total", (("kind", "held"),))] == 2
    assert found[("sebridge_deliveries_total", (("outcome", "delivered"), ("sink", "jsonl")))] > 0


def test_imds_attempts_are_counted_apart_from_polls(sim: Simulator, tmp_path: Path) -> None:
    """Five 500s and five 429s (with Retry-After) end two polls in error; the attempts
    behind them show each retry and each 429, and add up to what IMDS received."""
    daemon = compose_daemon(
        ImdsClient(sim.url, timeout=2.0, first_timeout=5.0, sleep=lambda s: None),
        Store(f"sqlite:///{tmp_path}/state.db", agent="vm0"),
        {},
        vm_name="vm0",
    )
    try:
        daemon.tick()
        sim.inject("500", count=5)
        daemon.tick()  # retry, retry, error
        daemon.tick()  # retry, retry, ok
        sim.inject("429", count=5)
        daemon.tick()  # throttled, throttled, error
        daemon.tick()  # throttled, throttled, ok
        found = samples(daemon.metrics)
    finally:
        daemon.imds.close()
        daemon.store.close()
    requests = "sebridge_imds_requests_total"
    counts = {o: found[(requests, (("outcome", o),))] for o in REQUEST_OUTCOMES}
    assert counts == {"ok": 3, "retry": 4, "throttled": 4, "error": 2}
    assert sum(counts.values()) == len(sim.requests)
    assert found[("sebridge_imds_polls_total", (("outcome", "error"),))] == 2


def test_the_process_own_figures_are_shown() -> None:
    found = samples(Metrics(["jsonl"]))
    assert found[("process_resident_memory_bytes", ())] > 1_000_000
    assert found[("process_cpu_seconds_total", ())] > 0
    assert found[("process_open_fds", ())] >= 3
    assert found[("process_start_time_seconds", ())] > 1_600_000_000
