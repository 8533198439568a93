"""Three agents write about the same events at once on PostgreSQL and never deadlock.

Before one lock order, an agent recording its own POST's outcome (UPDATE approvals, then
the event's row) and another agent's tick (the event's row, then INSERT INTO approvals ...
ON CONFLICT DO NOTHING, which waits for the first) deadlocked; when the transaction
PostgreSQL rolled back was the outcome, the approval stayed claimed and was later announced
as "not sent" although IMDS had it. Here every agent, for event after event, records the
document with the policy's approval, claims the approval, records an outcome, puts it back,
records an "I'm on it" and loses sight of the event, as fast as it can, in step with the
others: every write transaction about an event locks its row first (Store.lock_events).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from sebridge.kernel.errors import StoreError
from sebridge.model import Approval, Document, ScheduledEvent, Transition, TransitionKind
from sebridge.store import Store

AGENTS = ("vm0", "vm1", "vm2")
ROUNDS = 25
PER_DOCUMENT = 12  # a tick's transaction holds many events' rows at once, as a busy one does
T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=60)


@pytest.fixture
def stores(pg_url: str) -> Iterator[list[Store]]:
    opened = [Store(pg_url, agent=agent, exclusive=True) for agent in AGENTS]
    yield opened
    for store in opened:
        store.close()


def _agent(store: Store, start: threading.Barrier, errors: list[str]) -> None:
    """Each round: record a document of new events with the policy's approvals (as every
    agent does when it first sees them), then carry out what it can claim: once put back
    (IMDS did not answer), then posted, each outcome with its announcement."""
    for n in range(ROUNDS):
        now = T0 + timedelta(seconds=n)
        events = [
            ScheduledEvent(f"E{n:03d}-{i:02d}", "Reboot", "Scheduled", AGENTS)
            for i in range(PER_DOCUMENT)
        ]
        start.wait()
        try:
            store.documents.apply(
                Document(n, tuple(events)),
                [(Transition(TransitionKind.SCHEDULED, e, now), ["slack"]) for e in events],
                now,
                approvals=[Approval(e.event_id, "policy", "policy", now) for e in events],
            )
            for attempt in range(2):
                for claimed in store.approvals.claim(now, LEASE):
                    event = next(e for e in events if e.event_id == claimed.event_id)
                    if attempt == 0:
                        note = Transition(TransitionKind.TAKEN, event, now, actor=store.agent)
                        store.transitions.record(note, ["slack"], now)
                        store.approvals.finish(claimed, "pending", now, error="503")
                        continue
                    approved = Transition(
                        TransitionKind.APPROVED, event, now, actor="policy", via="policy"
                    )
                    store.approvals.finish(
                        claimed, "posted", now, transition=approved, sinks=["slack"]
                    )
            store.documents.apply(Document(f"gone-{n}", ()), [], now)  # it loses sight of them
        except StoreError as exc:
            errors.append(f"{store.agent} round {n}: {exc}")


@pytest.mark.slow
def test_agents_writing_about_one_event_at_once_never_deadlock(stores: list[Store]) -> None:
    start = threading.Barrier(len(stores))
    errors: list[str] = []
    threads = [threading.Thread(target=_agent, args=(s, start, errors)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    # Every event was approved once: one outcome recorded, one "approved" announced.
    states = stores[0].db.all("SELECT state, COUNT(*) FROM approvals GROUP BY state")
    assert states == [("posted", ROUNDS * PER_DOCUMENT)]
    approved = stores[0].db.all("SELECT COUNT(*) FROM transitions WHERE kind = 'approved'")
    assert approved == [(ROUNDS * PER_DOCUMENT,)]
