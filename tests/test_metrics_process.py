"""/metrics and /readyz of a real `sebridge run` process, read with Prometheus's own parser.

One daemon delivers to every sink (Slack in Socket Mode, Teams, Jira, JSON lines: fakes
over real sockets) while Teams fails (two 503s, then a 400), IMDS fails for a while,
people approve from Slack (twice at once, and once for an unknown event) and the CLI;
the scrapes taken along the way are checked for the counters' values, and for label
values that come only from the fixed sets (never an event id, a VM name, a person or an
error text: the scenario plants distinctive ones of each).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from fakes.jira import FakeJira
from fakes.slack import FakeSlack
from fakes.teams import FakeTeams
from helpers import (
    DaemonProcess,
    free_port,
    query,
    run_cli,
    toml_str,
    wait_until,
    write_config,
)
from sebridge import __version__
from sebridge.engine.metrics import (
    APPROVAL_OUTCOMES,
    DELIVERY_OUTCOMES,
    HOOK_OUTCOMES,
    HOOK_STAGES,
    POLL_OUTCOMES,
    REQUEST_OUTCOMES,
    VIAS,
)
from sebridge.imds.simulator import Simulator
from sebridge.model import TransitionKind
from sebridge.web.store_gauges import EVENT_STATES

# one real `sebridge run` process through a whole scenario: about 15 s for the module
pytestmark = pytest.mark.slow

OPS = "C0123456789"
SINKS = ("slack", "teams", "jira", "jsonl")
VM = "vm-metrics-q7xk"  # distinctive: must never be a label value
PERSON = "Pat Labelcheck"
ERROR_TEXT = "ERRTEXT-zq81 upstream exploded"
DESCRIPTION = "DESCR-kx9 host maintenance"
ALLOWED = {
    "outcome": {
        *POLL_OUTCOMES,
        *REQUEST_OUTCOMES,
        *DELIVERY_OUTCOMES,
        *APPROVAL_OUTCOMES,
        *HOOK_OUTCOMES,
    },
    "kind": {k.value for k in TransitionKind},
    "sink": set(SINKS),
    "via": set(VIAS),
    "stage": set(HOOK_STAGES),
    "state": set(EVENT_STATES),
    "version": {__version__},
}

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@dataclass
class Run:
    """What the scenario saw: scrapes in order, the event ids, the readiness answers."""

    scrapes: list[Samples] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    event_ids: list[str] = field(default_factory=list)
    ready: list[tuple[int, dict[str, object]]] = field(default_factory=list)
    log: str = ""

    @property
    def last(self) -> Samples:
        return self.scrapes[-1]


def scrape(base: str, run: Run) -> Samples:
    answer = requests.get(f"{base}/metrics", timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.headers["Content-Type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(answer.text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    run.texts.append(answer.text)
    run.scrapes.append(samples)
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def config_text(
    tmp_path: Path, sim: Simulator, slack: FakeSlack, teams: FakeTeams, jira: FakeJira, port: int
) -> Path:
    extra = (
        f'[http]\nlisten = "127.0.0.1:{port}"\n'
        f"[slack]\nbot_token = {toml_str(slack.bot_token)}\n"
        f"app_token = {toml_str(slack.app_token)}\nchannel = {toml_str(OPS)}\n"
        f'approvers = ["U0AAA"]\napi_url = {toml_str(slack.url)}\n'
        f"[teams]\nwebhook_url = {toml_str(teams.workflows_url)}\n"
        f'[jira]\nurl = {toml_str(jira.url)}\nproject = "OPS"\n'
        f"email = {toml_str(jira.email)}\napi_token = {toml_str(jira.token)}\n"
    )
    return write_config(
        tmp_path / "sebridge.toml",
        endpoint=sim.url,
        db=tmp_path / "state.db",
        jsonl=tmp_path / "events.jsonl",
        vm_name=VM,
        extra=extra,
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    tmp_path = tmp_path_factory.mktemp("metrics")
    found = Run()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with (
        Simulator(port=0, vm_name=VM, approval_delay=3600) as sim,
        FakeSlack() as slack,
        FakeTeams() as teams,
        FakeJira("cloud") as jira,
    ):
        config = config_text(tmp_path, sim, slack, teams, jira, port)
        db = tmp_path / "state.db"
        daemon = DaemonProcess(config, tmp_path / "daemon.log")
        try:
            scenario(found, base, sim, slack, teams, config, db, daemon)
        finally:
            daemon.kill()
            found.log = daemon.log_text()
    yield found


def outbox(db: Path) -> dict[str, int]:
    """Outbox rows by state."""
    return {
        str(r[0]): int(r[1]) for r in query(db, "SELECT state, COUNT(*) FROM outbox GROUP BY state")
    }


def ready(base: str) -> tuple[int, dict[str, object]] | None:
    try:
        answer = requests.get(f"{base}/readyz", timeout=5)
    except requests.ConnectionError:
        return None
    return answer.status_code, answer.json()


def scenario(
    run: Run,
    base: str,
    sim: Simulator,
    slack: FakeSlack,
    teams: FakeTeams,
    config: Path,
    db: Path,
    daemon: DaemonProcess,
) -> None:
    run.ready.append(wait_until(lambda: ready(base), 30, message="the HTTP server"))
    wait_until(lambda: ready(base) == (200, {"ready": True}), 30, message="/readyz 200")
    assert slack.wait_connected(20)
    # /readyz is 200 once the poll thread has IMDS's answer; the recorder counts that first
    # (empty) document on its own thread, after: waited for, on scrapes not kept.
    wait_until(
        lambda: value(scrape(base, Run()), "sebridge_imds_polls_total", outcome="changed") == 1,
        30,
        message="the first document counted",
    )
    scrape(base, run)  # before any event: every known counter at zero

    teams.fail_next(503, ERROR_TEXT, times=2)
    teams.fail_next(400, ERROR_TEXT)
    first = sim.schedule("Reboot", resources=[VM], description=DESCRIPTION)
    second = sim.schedule("Redeploy", resources=[VM], description=DESCRIPTION)
    run.event_ids += [first, second]
    wait_until(lambda: outbox(db) == {"delivered": 7, "failed": 1}, 30, message="8 deliveries")
    scrape(base, run)

    # Two people click Approve on the first event at once; someone clicks for an unknown one.
    payload = slack.block_actions_payload("approve", first, "U0AAA", OPS)
    slack.send_envelope(payload)
    slack.send_envelope(payload)
    slack.send_block_actions("approve", "0000-not-an-event", "U0AAA", OPS, message={})
    cli = run_cli("approve", second, "--as", PERSON, "--config", str(config))
    assert cli.returncode == 0, cli.stderr
    wait_until(lambda: len(sim.start_requests) == 2, 30, message="both StartRequests")

    sim.inject("500", count=50)  # IMDS fails for a while
    wait_until(
        lambda: value(scrape(base, run), "sebridge_imds_polls_total", outcome="error") > 0,
        30,
        message="a failed poll counted",
    )
    sim.clear_faults()
    sim.complete(first)
    sim.complete(second)
    wait_until(
        lambda: (
            value(scrape(base, run), "sebridge_events", state="completed") == 2
            and outbox(db) == {"delivered": 23, "failed": 1}
        ),
        30,
        message="both events completed and delivered",
    )
    wait_until(
        lambda: (
            value(scrape(base, run), "sebridge_approvals_total", via="slack", outcome="already")
            == 1
        ),
        15,
        message="the second click answered",
    )


def test_counters_before_any_event_are_zero(run: Run) -> None:
    first = run.scrapes[0]
    # By now the daemon recorded IMDS's first (empty) document and polled it again.
    assert value(first, "sebridge_imds_polls_total", outcome="error") == 0
    assert value(first, "sebridge_imds_polls_total", outcome="changed") == 1
    for kind in TransitionKind:
        assert value(first, "sebridge_transitions_total", kind=kind.value) == 0
    for sink in SINKS:
        for outcome in DELIVERY_OUTCOMES:
            assert value(first, "sebridge_deliveries_total", sink=sink, outcome=outcome) == 0
        assert value(first, "sebridge_delivery_seconds_count", sink=sink) == 0
        assert value(first, "sebridge_outbox_pending", sink=sink) == 0
    for via in VIAS:
        for outcome in APPROVAL_OUTCOMES:
            assert value(first, "sebridge_approvals_total", via=via, outcome=outcome) == 0
    for stage in HOOK_STAGES:
        for outcome in HOOK_OUTCOMES:
            assert value(first, "sebridge_hooks_total", stage=stage, outcome=outcome) == 0
    for state in EVENT_STATES:
        assert value(first, "sebridge_events", state=state) == 0
    assert value(first, "sebridge_build_info", version=__version__) == 1
    assert value(first, "sebridge_imds_last_success_timestamp_seconds") > 0


def test_counters_follow_the_scenario(run: Run) -> None:
    last = run.last
    kinds = {k.value: 0 for k in TransitionKind} | {"scheduled": 2, "approved": 2, "completed": 2}
    for kind, count in kinds.items():
        assert value(last, "sebridge_transitions_total", kind=kind) == count, kind
    for sink in ("slack", "jira", "jsonl"):
        assert value(last, "sebridge_deliveries_total", sink=sink, outcome="delivered") == 6
        assert value(last, "sebridge_deliveries_total", sink=sink, outcome="retry") == 0
        assert value(last, "sebridge_deliveries_total", sink=sink, outcome="failed") == 0
        assert value(last, "sebridge_delivery_seconds_count", sink=sink) == 6
    # Teams: the first card failed twice (503, retried) then for good (400); 5 others landed.
    assert value(last, "sebridge_deliveries_total", sink="teams", outcome="retry") == 2
    assert value(last, "sebridge_deliveries_total", sink="teams", outcome="failed") == 1
    assert value(last, "sebridge_deliveries_total", sink="teams", outcome="delivered") == 5
    assert value(last, "sebridge_delivery_seconds_count", sink="teams") == 5
    for sink in SINKS:
        assert value(last, "sebridge_outbox_pending", sink=sink) == 0
    approvals = {(v, o): 0 for v in VIAS for o in APPROVAL_OUTCOMES} | {
        ("slack", "approved"): 1,  # the first of the two clicks, carried out here
        ("slack", "already"): 1,  # the second
        ("slack", "refused"): 1,  # the unknown event
        ("cli", "approved"): 1,  # recorded by `sebridge approve`, carried out by the daemon
    }
    for (via, outcome), count in approvals.items():
        got = value(last, "sebridge_approvals_total", via=via, outcome=outcome)
        assert got == count, (via, outcome)
    assert value(last, "sebridge_events", state="completed") == 2
    assert value(last, "sebridge_imds_polls_total", outcome="error") >= 1
    # The empty document, the events' arrival, their leaving (one or two polls each).
    assert value(last, "sebridge_imds_polls_total", outcome="changed") >= 3
    assert value(last, "sebridge_imds_polls_total", outcome="unchanged") >= 1
    # Each poll that failed on IMDS's 500s tried three times: two retries, then the error.
    errors = value(last, "sebridge_imds_requests_total", outcome="error")
    assert errors == value(last, "sebridge_imds_polls_total", outcome="error")
    assert value(last, "sebridge_imds_requests_total", outcome="retry") >= 2 * errors
    assert value(last, "sebridge_imds_requests_total", outcome="ok") > 0
    assert value(last, "sebridge_imds_requests_total", outcome="throttled") == 0
    assert value(last, "process_resident_memory_bytes") > 1_000_000
    assert value(last, "process_open_fds") > 0


def test_label_values_come_only_from_the_fixed_sets(run: Run) -> None:
    assert len(run.event_ids) == 2
    planted = [*run.event_ids, VM, PERSON, "U0AAA", ERROR_TEXT, DESCRIPTION, "0000-not-an-event"]
    for samples in run.scrapes:
        for _, labels in samples:
            for name, label_value in labels:
                if name == "le":  # histogram bucket bounds: numbers
                    float(label_value)
                    continue
                assert label_value in ALLOWED[name], (name, label_value)
    for text in run.texts:  # not in help texts either: nowhere in what a scrape returns
        for word in planted:
            for piece in (word, word.lower(), json.dumps(word)[1:-1]):
                assert piece not in text, piece
    # The planted words did reach the sinks' paths: the daemon saw and logged some of them.
    assert run.event_ids[0] in run.log or run.event_ids[0].lower() in run.log


def test_readyz_waits_for_imds_then_says_ready(tmp_path: Path) -> None:
    imds_port, http_port = free_port(), free_port()
    base = f"http://127.0.0.1:{http_port}"
    config = write_config(
        tmp_path / "sebridge.toml",
        endpoint=f"http://127.0.0.1:{imds_port}",
        db=tmp_path / "state.db",
        vm_name=VM,
        extra=f'[http]\nlisten = "127.0.0.1:{http_port}"\n',
    )
    daemon = DaemonProcess(config, tmp_path / "daemon.log")
    try:
        status, body = wait_until(lambda: ready(base), 30, message="the HTTP server")
        assert status == 503, body
        assert body["ready"] is False
        (reason,) = body["reasons"]  # type: ignore[misc]
        assert str(reason).startswith("IMDS has not answered yet"), reason
        with Simulator(port=imds_port, vm_name=VM):
            wait_until(lambda: ready(base) == (200, {"ready": True}), 30, message="ready")
    finally:
        daemon.kill()
