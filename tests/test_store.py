"""The store: one transaction per tick, the outbox's order and claims, approvals, history, pruning.

Each behaviour on both dialects: SQLite (a file in tmp_path) and PostgreSQL (a database of this
module's own on the machine's server; skipped only when no server answers).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sebridge.kernel.errors import StoreError
from sebridge.model import Approval, Document, Receipt, ScheduledEvent, Transition, TransitionKind
from sebridge.model.decision import Decision
from sebridge.store import Store
from sebridge.store.schema import VERSION

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def event(event_id: str = "E1", status: str = "Scheduled", **kw: object) -> ScheduledEvent:
    return ScheduledEvent(
        event_id=event_id,
        event_type=str(kw.get("event_type", "Reboot")),
        status=status,
        resources=("vm0",),
        not_before=T0 + timedelta(minutes=15) if status == "Scheduled" else None,
        not_before_text="x",
    )


def scheduled(e: ScheduledEvent, at: datetime = T0) -> Transition:
    return Transition(TransitionKind.SCHEDULED, e, at)


def test_fresh_store_has_no_document(store: Store) -> None:
    assert store.documents.last() is None


def test_apply_writes_document_events_transitions_and_outbox(store: Store) -> None:
    e = event()
    store.documents.apply(
        Document(2, (e,)),
        [(scheduled(e), ["console", "jsonl"])],
        T0,
        decisions={"E1": Decision("inform", "tests", prepare=("drain",), remind=(600, 60))},
    )
    assert store.documents.last() == Document(2, (e,))
    record = store.events.get("E1")
    assert record is not None and record.present and record.state == "scheduled"
    assert record.decision == Decision("inform", "tests", prepare=("drain",), remind=(600, 60))
    assert record.policy == "inform"
    assert {d.sink for d in record.deliveries} == {"console", "jsonl"}
    assert store.outbox.pending_count() == 2
    (entry,) = store.history.entries()
    assert entry.transition == scheduled(e)


def test_event_lookup_ignores_case(store: Store) -> None:
    e = event("ABC-DEF")
    store.documents.apply(Document(1, (e,)), [], T0)
    record = store.events.get("abc-def")
    assert record is not None and record.event.event_id == "ABC-DEF"


def test_gone_events_leave_the_latest_document_but_stay_in_history(store: Store) -> None:
    e = event()
    store.documents.apply(Document(1, (e,)), [(scheduled(e), ["console"])], T0)
    later = T0 + timedelta(minutes=1)
    store.documents.apply(
        Document(2, ()), [(Transition(TransitionKind.CANCELLED, e, later), ["console"])], later
    )
    assert store.documents.last() == Document(2, ())
    record = store.events.get("E1")
    assert record is not None and not record.present and record.gone_at == later
    assert record.state == "cancelled"
    assert [h.transition.kind for h in store.history.entries()] == ["scheduled", "cancelled"]


def test_a_failing_tick_writes_nothing(store: Store) -> None:
    e = event()
    bad = Transition(TransitionKind.SCHEDULED, event("NOT-IN-DOC"), T0)  # no event row: FK fails
    with pytest.raises(StoreError):
        store.documents.apply(
            Document(1, (e,)), [(scheduled(e), ["console"]), (bad, ["console"])], T0
        )
    assert store.documents.last() is None
    assert store.events.get("E1") is None
    assert store.history.entries() == []
    assert store.outbox.pending_count() == 0


def test_state_survives_reopening(store_url: str) -> None:
    first = Store(store_url)
    e = event()
    first.documents.apply(Document(7, (e,)), [(scheduled(e), ["console"])], T0)
    first.close()
    again = Store(store_url)
    assert again.documents.last() == Document(7, (e,))
    assert again.outbox.pending_count() == 1
    again.close()


def test_newer_schema_is_refused(store_url: str) -> None:
    first = Store(store_url)
    first.db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(VERSION + 1),))
    first.close()
    with pytest.raises(StoreError, match="upgrade sebridge"):
        Store(store_url)


def test_unwritable_location_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StoreError, match="cannot"):
        Store(f"sqlite:///{blocker}/sub/state.db")


def test_outbox_delivers_an_events_rows_in_order(store: Store) -> None:
    e = event()
    store.documents.apply(Document(1, (e,)), [(scheduled(e), ["slack"])], T0)
    started = event(status="Started")
    store.documents.apply(
        Document(2, (started,)), [(Transition("started", started, T0), ["slack"])], T0
    )
    first = store.outbox.claim("slack", T0, T0 + timedelta(minutes=2))
    assert [d.transition.kind for d in first] == ["scheduled"]  # "started" waits behind it
    store.outbox.retry(first[0], "boom", T0 + timedelta(seconds=5))
    assert store.outbox.claim("slack", T0, T0 + timedelta(minutes=2)) == []
    again = store.outbox.claim("slack", T0 + timedelta(seconds=5), T0 + timedelta(minutes=3))
    assert [d.transition.kind for d in again] == ["scheduled"] and again[0].attempts == 1
    store.outbox.ack(again[0], Receipt("C1:123.456", {"channel": "C1"}), T0)
    (second,) = store.outbox.claim("slack", T0 + timedelta(seconds=6), T0 + timedelta(minutes=3))
    assert second.transition.kind == "started"
    assert second.receipt == Receipt("C1:123.456", {"channel": "C1"})


def test_claimed_rows_are_not_claimed_twice_until_the_lease_ends(store: Store) -> None:
    e = event()
    store.documents.apply(Document(1, (e,)), [(scheduled(e), ["console"])], T0)
    assert len(store.outbox.claim("console", T0, T0 + timedelta(seconds=60))) == 1
    assert (
        store.outbox.claim("console", T0 + timedelta(seconds=30), T0 + timedelta(seconds=90)) == []
    )
    assert (
        len(store.outbox.claim("console", T0 + timedelta(seconds=61), T0 + timedelta(seconds=120)))
        == 1
    )


def test_own_claims_are_released_after_a_restart(store: Store) -> None:
    e = event()
    store.documents.apply(Document(1, (e,)), [(scheduled(e), ["console"])], T0)
    store.outbox.claim("console", T0, T0 + timedelta(minutes=2))
    assert store.outbox.release_own_claims() == 1
    assert len(store.outbox.claim("console", T0, T0 + timedelta(minutes=2))) == 1


def test_permanent_failure_is_kept_visible_and_unblocks_later_rows(store: Store) -> None:
    e = event()
    store.documents.apply(Document(1, (e,)), [(scheduled(e), ["slack"])], T0)
    started = event(status="Started")
    store.documents.apply(
        Document(2, (started,)), [(Transition("started", started, T0), ["slack"])], T0
    )
    (first,) = store.outbox.claim("slack", T0, T0 + timedelta(minutes=2))
    store.outbox.fail(first, "channel_not_found: invite the bot")
    (second,) = store.outbox.claim("slack", T0, T0 + timedelta(minutes=2))
    assert second.transition.kind == "started"
    record = store.events.get("E1")
    assert record is not None
    (status,) = record.deliveries
    assert status.state == "failed" and "channel_not_found" in (status.last_error or "")


def test_approval_is_recorded_once(store: Store) -> None:
    store.documents.apply(Document(1, (event(),)), [], T0)
    assert store.approvals.record(Approval("E1", "alice", "cli", T0)) is True
    assert store.approvals.record(Approval("E1", "bob", "slack", T0)) is False
    approval = store.approvals.get("E1")
    assert approval is not None and approval.actor == "alice" and approval.state == "pending"


def test_approval_claims_and_outcomes(store: Store) -> None:
    e = event()
    store.documents.apply(
        Document(1, (e,)), [], T0, approvals=[Approval("E1", "policy", "policy", T0)]
    )
    assert store.approvals.has_pending(T0)
    (claimed,) = store.approvals.claim(T0, timedelta(seconds=60))
    assert claimed.actor == "policy"
    assert store.approvals.claim(T0, timedelta(seconds=60)) == []  # held
    store.approvals.finish(claimed, "pending", T0, error="IMDS down")  # put back: retried next tick
    (again,) = store.approvals.claim(T0, timedelta(seconds=60))
    assert again.attempts == 1 and again.last_error == "IMDS down"
    approved = Transition(TransitionKind.APPROVED, e, T0, actor="policy", via="policy")
    store.approvals.finish(again, "posted", T0, transition=approved, sinks=["console"])
    assert not store.approvals.has_pending(T0)
    assert store.approvals.approved_ids() == {"E1"}
    assert [h.transition.kind for h in store.history.entries()] == ["approved"]
    record = store.events.get("E1")
    assert record is not None and record.state == "approved"


def test_a_dead_claimers_approval_is_taken_up_again(store: Store) -> None:
    store.documents.apply(
        Document(1, (event(),)), [], T0, approvals=[Approval("E1", "a", "cli", T0)]
    )
    store.approvals.claim(T0, timedelta(seconds=60))
    assert len(store.approvals.claim(T0 + timedelta(seconds=61), timedelta(seconds=60))) == 1


def test_prune_forgets_old_gone_events_only(store: Store) -> None:
    old, current = event("OLD"), event("NOW")
    store.documents.apply(
        Document(1, (old, current)), [(scheduled(old), ["c"]), (scheduled(current), ["c"])], T0
    )
    store.documents.apply(Document(2, (current,)), [], T0 + timedelta(days=1))
    assert store.history.prune(T0 + timedelta(days=2)) == 1
    assert store.events.get("OLD") is None and store.events.get("NOW") is not None
    assert [h.transition.event_id for h in store.history.entries()] == ["NOW"]
    assert store.outbox.pending_count() == 1


def test_events_lists_present_and_recently_gone(store: Store) -> None:
    a, b = event("A"), event("B")
    store.documents.apply(Document(1, (a, b)), [], T0)
    store.documents.apply(Document(2, (a,)), [], T0 + timedelta(hours=1))
    assert [r.event.event_id for r in store.events.current()] == ["A"]
    recent = store.events.current(include_gone_since=T0)
    assert [r.event.event_id for r in recent] == ["A", "B"]


@pytest.mark.parametrize("token", [5, 2**70, "abc123", 1.5, True, "007"])
def test_an_opaque_incarnation_is_kept_as_it_came(store: Store, token: object) -> None:
    # DocumentIncarnation may be any JSON scalar (peers send "abc123"): PostgreSQL's
    # columns must take it too, and it must compare equal after a restart.
    e = event()
    store.documents.apply(Document(token, (e,)), [(scheduled(e), ["console"])], T0)  # type: ignore[arg-type]
    back = store.documents.last()
    assert back is not None
    assert back.incarnation == token and type(back.incarnation) is type(token)
    store.documents.apply(Document(token, (e,)), [], T0 + timedelta(seconds=1))  # type: ignore[arg-type]
    assert store.documents.last() == back
