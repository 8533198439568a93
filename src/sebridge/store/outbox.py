"""The outbox: one row per (transition, sink), claimed, acked, retried or failed.

Rows of one event reach a sink in order: a row waits while an earlier row of
the same event and sink is still pending, so "started" never overtakes the
"scheduled" message it is meant to update.

A claim is owned (store/claims.py): begin, renew, ack, retry and fail write only for the
holder of the row's live claim, and return False ("lost") otherwise, changing nothing.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime

from sebridge.model import Receipt, Transition
from sebridge.model.approval import CARRIED_OUT
from sebridge.model.kinds import EVERY_STEP
from sebridge.model.records import Delivery
from sebridge.store.claims import new_token
from sebridge.store.codec import decision_from_db, from_iso, iso, transition_from_json
from sebridge.store.database import Database

__all__ = ["Outbox"]

PENDING, DELIVERED, FAILED = "pending", "delivered", "failed"
# Every write after the claim: this row, still pending, under the writer's claim.
_HELD = f"WHERE id = ? AND claim_token = ? AND state = '{PENDING}'"
# A write that ends the claim lets go of it.
_LET_GO = "claimed_by = NULL, claimed_until = NULL, claim_token = NULL"
# Row `o` is the oldest pending row of its event for its sink: the only one of the event a
# claim may take (rows of one event go in order). One probe of outbox_pending_event. Not
# NOT EXISTS: a planner without statistics turned that into an anti join scanning every
# pending row for each row.
_HEAD = (
    "o.id = (SELECT MIN(p.id) FROM outbox p WHERE p.sink = o.sink "
    f"AND p.event_id = o.event_id AND p.state = '{PENDING}')"
)


class Outbox:
    """Outbox rows of one store."""

    def __init__(self, db: Database, agent: str) -> None:
        self._db = db
        self._agent = agent
        self._wanted: dict[str, frozenset[str]] = {}
        self._gone = db.claimant_gone("o.claimed_by")
        # Row `o` is claimed by nobody now (one `?`: now): never, its lease ended, or its
        # claimant is gone (Database.claimant_gone).
        self._free = f"(o.claimed_until IS NULL OR o.claimed_until < ? OR {self._gone})"
        # The claim's query (parameters: claim_params), public for EXPLAIN in tests. Who
        # approved, as messages say it: the person whose approval was carried out (one
        # approved anyway carried out the approval someone else had asked for), the
        # channel's id of that person, and whether it was anyway; the event's lifecycle
        # state (a recover hook's step after "completed" leaves it completed).
        self.claim_sql = (
            "SELECT o.id, o.attempts, t.data, e.policy, e.gone_at, r.external_id, r.data, "
            "CASE WHEN a.state IN (?, ?) THEN COALESCE(a.anyway_by, a.actor) END, o.begun, "
            "o.transition_id, o.begun_by, "
            "a.state, e.decision, "
            "CASE WHEN a.anyway_by IS NULL THEN a.actor_id ELSE a.anyway_id END, "
            "a.anyway_by, e.state "
            "FROM outbox o JOIN transitions t ON t.id = o.transition_id "
            "JOIN events e ON e.event_id = o.event_id "
            "LEFT JOIN receipts r ON r.event_id = o.event_id AND r.sink = o.sink "
            "LEFT JOIN approvals a ON a.event_id = o.event_id "
            f"WHERE o.sink = ? AND o.state = '{PENDING}' AND o.next_attempt_at <= ? "
            f"AND {self._free} AND {_HEAD} "
            "ORDER BY o.id LIMIT ? FOR UPDATE OF o SKIP LOCKED"
        )

    def deliver_only(self, wanted: Mapping[str, Collection[str]]) -> None:
        """The kinds of transition each sink delivers (its `transitions`, or its
        integration's default: integrations/registry.py); a sink not named: every step."""
        self._wanted = {sink: frozenset(kinds) for sink, kinds in wanted.items()}

    def wants(self, sink: str, kind: str) -> bool:
        """Whether `sink` delivers transitions of this kind."""
        return kind in self._wanted.get(sink, EVERY_STEP)

    def enqueue(
        self, transition_id: int, transition: Transition, sinks: Sequence[str], now: datetime
    ) -> None:
        """Add one row per sink that wants the transition's kind (the one place a kind is
        filtered); call inside the transaction that wrote the transition."""
        for sink in sinks:
            if not self.wants(sink, transition.kind):
                continue
            self._db.execute(
                "INSERT INTO outbox (transition_id, event_id, sink, state, next_attempt_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (transition_id, sink) DO NOTHING",
                (transition_id, transition.event_id, sink, PENDING, iso(now)),
            )

    def release_own_claims(self) -> int:
        """Forget claims this agent held before it restarted (its process is gone)."""
        return self._db.execute(
            f"UPDATE outbox SET {_LET_GO} WHERE claimed_by = ? AND state = ?",
            (self._agent, PENDING),
        )

    def claim(
        self, sink: str, now: datetime, lease_until: datetime, limit: int = 20
    ) -> list[Delivery]:
        """Claim due rows for `sink`, oldest first, at most one per event: unclaimed ones,
        and those whose claim ended (its lease, or its claimant: Database.claimant_gone).

        Walks the sink's pending rows in id order through the partial indexes of schema
        version 6 and stops at `limit`: constant in the backlog's size. 'pending' is
        written into the SQL, not passed: a planner uses a partial index only for a
        query that states the index's condition (PostgreSQL's generic plans cannot see
        a parameter's value).

        The batch shares one new token; each row's lease then runs on its own: begin()
        renews it as the row's attempt begins, and a row whose lease ran out before its
        turn, taken by another agent meanwhile, is lost to this claim (begin() says so)."""
        token = new_token()
        with self._db.transaction():
            rows = self._db.all(self.claim_sql, self.claim_params(sink, now, limit))
            if rows:  # one statement for the batch: one round trip
                self._db.execute(
                    "UPDATE outbox SET claimed_by = ?, claimed_until = ?, claim_token = ? "
                    f"WHERE id IN ({', '.join('?' * len(rows))})",
                    (self._agent, iso(lease_until), token, *(row[0] for row in rows)),
                )
        return [
            Delivery(
                id=row[0],
                sink=sink,
                transition=transition_from_json(row[2]),
                attempts=row[1],
                policy=row[3],
                gone_at=from_iso(row[4]) if row[4] else None,
                receipt=Receipt(row[5], json.loads(row[6])) if row[5] is not None else None,
                approved_by=row[7],
                begun=row[8],
                transition_id=row[9],
                begun_by=row[10],
                approval_state=row[11],
                rule=decision.rule,
                # Whether a failed prepare hook holds: what its messages offer.
                on_prepare_failure=decision.on_prepare_failure,
                approved_by_id=row[13] if row[7] is not None else None,
                approved_anyway=row[7] is not None and row[14] is not None,
                event_state=row[15],
                token=token,
            )
            for row in rows
            for decision in (decision_from_db(row[12], row[3]),)
        ]

    def claim_params(self, sink: str, now: datetime, limit: int = 20) -> tuple[object, ...]:
        """The parameters of claim_sql."""
        return (*CARRIED_OUT, sink, iso(now), iso(now), limit)

    def begin(self, delivery: Delivery, lease_until: datetime) -> bool:
        """Record an attempt as begun, committed before the sink is called: should the
        process die before ack(), the next attempt knows this one may have landed. Renews
        the row's lease to `lease_until`. False: the claim was lost (its lease ran out and
        another claim took the row): nothing written, do not send."""
        return self._write(
            f"UPDATE outbox SET begun = begun + 1, begun_by = ?, claimed_until = ? {_HELD}",
            (self._agent, iso(lease_until)),
            delivery,
        )

    def renew(self, delivery: Delivery, lease_until: datetime) -> bool:
        """Extend the claim's lease while its attempt is under way; False: it was lost."""
        return self._write(
            f"UPDATE outbox SET claimed_until = ? {_HELD}", (iso(lease_until),), delivery
        )

    def ack(self, delivery: Delivery, receipt: Receipt | None, now: datetime) -> bool:
        """Delivered: record it, and what the sink returned for later transitions. False:
        the claim was lost, nothing written (the row is the new holder's)."""
        with self._db.transaction():
            if not self._write(
                f"UPDATE outbox SET state = ?, delivered_at = ?, attempts = attempts + 1, "
                f"last_error = NULL, {_LET_GO} {_HELD}",
                (DELIVERED, iso(now)),
                delivery,
            ):
                return False
            if receipt is not None:
                self._db.execute(
                    "INSERT INTO receipts (event_id, sink, external_id, data) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT (event_id, sink) DO UPDATE SET "
                    "external_id = excluded.external_id, data = excluded.data",
                    (
                        delivery.transition.event_id,
                        delivery.sink,
                        receipt.external_id,
                        json.dumps(dict(receipt.data)),
                    ),
                )
        return True

    def retry(self, delivery: Delivery, error: str, next_attempt: datetime) -> bool:
        """A retryable failure: try again at `next_attempt`. False: the claim was lost."""
        return self._write(
            "UPDATE outbox SET attempts = attempts + 1, last_error = ?, next_attempt_at = ?, "
            f"{_LET_GO} {_HELD}",
            (error[:500], iso(next_attempt)),
            delivery,
        )

    def fail(self, delivery: Delivery, error: str) -> bool:
        """A permanent failure (or retries ran out): stop, keep the reason visible. False:
        the claim was lost, nothing written."""
        return self._write(
            f"UPDATE outbox SET state = ?, attempts = attempts + 1, last_error = ?, {_LET_GO} "
            f"{_HELD}",
            (FAILED, error[:500]),
            delivery,
        )

    def _write(self, sql: str, params: tuple[object, ...], delivery: Delivery) -> bool:
        """One write under the delivery's claim (the statement ends with _HELD)."""
        return self._db.execute(sql, (*params, delivery.id, delivery.token)) == 1

    def stranded(self) -> str:
        """SQL (two `?`: now, now), true when some row a claim could take now waits, yet
        nobody claims it: unclaimed, its lease ended, or its claimant gone (Agents.heartbeat
        asks, so an idle dispatcher need not look). A row behind an earlier row of its event
        is not one: it cannot be taken."""
        return (
            f"EXISTS (SELECT 1 FROM outbox o WHERE o.state = '{PENDING}' AND "
            f"o.next_attempt_at <= ? AND {self._free} AND {_HEAD})"
        )

    def next_due(self, sink: str) -> datetime | None:
        """The earliest moment claim() could take a row of `sink` (None: no row pending).

        Only the head of each event counts (a row behind an earlier one of its event cannot
        be taken, whenever it is due), and a head under a live claim (this agent's too) is
        due when both its retry time and its lease have come: a worker that looked sooner
        would find nothing and look again at once (docs/ARCHITECTURE.md, "Threads"). A
        claimant's death makes its rows due sooner: Agents.heartbeat says so."""
        row = self._db.one(
            "SELECT MIN(CASE WHEN o.claimed_until > o.next_attempt_at "
            f"AND NOT {self._gone} THEN o.claimed_until ELSE o.next_attempt_at END) "
            f"FROM outbox o WHERE o.sink = ? AND o.state = '{PENDING}' AND {_HEAD}",
            (sink,),
        )
        return from_iso(row[0]) if row and row[0] else None

    def busy(self, sink: str, now: datetime) -> bool:
        """Whether `sink` has a row claim() could take at `now`, or one this agent holds (its
        worker is sending it): what a flush waits for. A row waiting for its back-off, or
        behind an earlier row of its event, or held by another live agent, is not."""
        row = self._db.one(
            f"SELECT 1 FROM outbox o WHERE o.sink = ? AND o.state = '{PENDING}' "
            f"AND (o.claimed_by = ? OR (o.next_attempt_at <= ? AND {self._free} AND {_HEAD})) "
            "LIMIT 1",
            (sink, self._agent, iso(now), iso(now)),
        )
        return row is not None

    def pending_count(self) -> int:
        """Rows not yet delivered nor failed, over all sinks."""
        row = self._db.one("SELECT COUNT(*) FROM outbox WHERE state = ?", (PENDING,))
        return int(row[0]) if row else 0
