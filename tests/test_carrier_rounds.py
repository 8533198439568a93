"""The carrier's rounds (approval/carrier.py) on the kernel's worker shape: a round cut short
by the store puts back what it claimed and had not begun to POST, so the next round carries
it out at once, not after the claim's 60 s lease; what it had begun to POST stays claimed.

The carrier's clock is frozen here, so a claim's lease never ends: only the put-back can
let an approval go again. On both dialects, against the IMDS simulator.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from helpers import wait_until
from sebridge.approval.carrier import Carrier
from sebridge.approval.gate import GO, GateAnswer
from sebridge.imds import ImdsClient
from sebridge.imds.simulator import Simulator
from sebridge.kernel.errors import StoreError
from sebridge.model import Approval
from sebridge.model.records import EventRecord
from sebridge.store import Store

T0 = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)


class FailsOnce:
    """A readiness gate whose store fails once, for one event: a round cut short midway."""

    def __init__(self, event_id: str) -> None:
        self.event_id = event_id
        self.failed = 0

    def __call__(self, record: EventRecord) -> GateAnswer:
        if record.event.event_id == self.event_id and not self.failed:
            self.failed += 1
            raise StoreError("the store went away while the gate read the VMs' hook runs")
        return GO


def states(store: Store, *event_ids: str) -> list[str]:
    return [a.state if (a := store.approvals.get(e)) else "" for e in event_ids]


@pytest.fixture
def rig(store_url: str) -> Iterator[tuple[Simulator, ImdsClient, Store, list[str]]]:
    """Two events in the document, each approved (the first earlier: claimed first)."""
    with Simulator(port=0, vm_name="vm0", approval_delay=3600) as sim:
        first, second = sim.schedule("Reboot"), sim.schedule("Redeploy")
        imds = ImdsClient(sim.url, timeout=2.0)
        store = Store(store_url, agent="vm0")
        try:
            store.documents.apply(imds.get_document(), [], T0)
            store.approvals.record(Approval(first, "alice", "cli", T0))
            store.approvals.record(Approval(second, "bob", "cli", T0 + timedelta(seconds=1)))
            yield sim, imds, store, [first, second]
        finally:
            store.close()
            imds.close()


def test_a_round_cut_short_by_the_store_does_not_strand_what_it_claimed_run_once(
    rig: tuple[Simulator, ImdsClient, Store, list[str]],
) -> None:
    """`sebridge once` and the tests (run_once): the error reaches the caller; the next
    round carries both approvals out."""
    sim, imds, store, (first, second) = rig
    carrier = Carrier(store, imds, lambda policy: ["list"], clock=lambda: T0, gate=FailsOnce(first))
    with pytest.raises(StoreError):
        carrier.run_once()
    assert sim.start_requests == []  # the gate failed before anything went to IMDS
    assert carrier.run_once() == 2
    assert sorted(sim.start_requests) == sorted([first, second])
    assert states(store, first, second) == ["posted", "posted"]


def test_a_round_cut_short_by_the_store_does_not_strand_what_it_claimed_threaded(
    rig: tuple[Simulator, ImdsClient, Store, list[str]],
) -> None:
    """The daemon: the worker backs off and tries again; both StartRequests go out, long
    before any lease (frozen here) could end."""
    sim, imds, store, (first, second) = rig
    carrier = Carrier(store, imds, lambda policy: ["list"], clock=lambda: T0, gate=FailsOnce(first))
    carrier.start()
    carrier.wake()  # as the approvals' commit does
    try:
        wait_until(
            lambda: len(sim.start_requests) == 2,
            message=lambda: f"both StartRequests; IMDS received {sim.start_requests}",
        )
    finally:
        assert carrier.stop(10.0)
    assert sorted(sim.start_requests) == sorted([first, second])
    assert states(store, first, second) == ["posted", "posted"]
