"""The fleet page's rows: each event as the page, /fleet.json and the calendar show it.

Built from one read of the store (store/fleet_view.py) with the words every
other channel uses: each listed VM's readiness (hooks/readiness.py) and its
agent (live, silent since T, no agent: the readiness gate's own sorting by
[fleet]), what happens next (model/wording/outlook.py), who approved (`decider`), and
the affordances the one rule offers (model/approval.py: Approve exactly when an
approval would be carried out now; Approve anyway and retry for a held one).
A hook's output is masked again and cut to its tail, as on the approval page.
Pure but for the clock handed in. See docs/ARCHITECTURE.md, "The fleet page".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sebridge.hooks.readiness import Agents, agents, listed_vms, readiness
from sebridge.kernel.redact import Masker
from sebridge.model import ScheduledEvent
from sebridge.model.approval import CARRIED_OUT, ApprovalState, Blocker, anyway_offered, would_hold
from sebridge.model.decision import offers_anyway, offers_approval
from sebridge.model.readiness import VmReadiness, VmState
from sebridge.model.records import EventRecord, HookRunRecord
from sebridge.model.title import title
from sebridge.model.wording.hooks import last_lines
from sebridge.model.wording.outlook import Outlook, decided, decider, outlook, until
from sebridge.store.fleet_view import Changes, FleetRead

__all__ = [
    "FleetEvent",
    "FleetRows",
    "HookRow",
    "VmRow",
    "agent_of",
    "inputs",
]

TAIL_LINES, TAIL_LIMIT = 10, 2000  # a hook's output shown: its tail (as the approval page)
_ABSENT = (VmState.NO_AGENT, VmState.AGENT_SILENT)


@dataclass(frozen=True)
class VmRow:
    """One listed VM: its agent ("live", "silent since 2026-05-04 08:02 UTC", "no agent")
    and its readiness ("failed: drain exit 1"; "" when the rule names no prepare hooks, or
    its agent is missing) and readiness state."""

    vm: str
    agent: str
    readiness: str
    state: str


@dataclass(frozen=True)
class HookRow:
    """One hook run on one VM: state, why, seconds, and its output's masked tail."""

    vm: str
    stage: str
    hook: str
    state: str
    why: str
    seconds: float | None
    output: str
    attempt: int


@dataclass(frozen=True)
class FleetEvent:
    """One event as the fleet page shows it."""

    record: EventRecord
    title: str
    vms: tuple[VmRow, ...]
    next: Outlook
    decided: str
    approved_by: str  # "" when nobody approved it
    hooks: tuple[HookRow, ...]
    approve: bool  # Approve is offered (an approval would be carried out now)
    anyway: bool  # Approve anyway is offered
    retry: bool  # hooks retry is offered (a prepare hook failed; nothing was sent yet)
    changes: Changes
    not_before: datetime | None  # NotBefore; a started event's: when it started
    countdown: str  # "in 14 min", "3 min ago"

    @property
    def id(self) -> str:
        return self.record.event.event_id

    @property
    def held(self) -> bool:
        """Held, or nobody approved it and an approval would be held."""
        return self.next.held

    def as_json(self) -> dict[str, Any]:
        """For /fleet.json."""
        r, e, a = self.record, self.record.event, self.record.approval
        return {
            "event_id": e.event_id,
            "event_type": e.event_type,
            "title": self.title,
            "state": r.state,
            "open": r.present,
            "source": e.source,
            "description": e.description,
            "not_before": self.not_before.isoformat() if self.not_before else None,
            "starts": self.countdown,
            "duration_seconds": e.duration_seconds,
            "gone_at": r.gone_at.isoformat() if r.gone_at else None,
            "action": r.decision.action,
            "rule": r.decision.rule,
            "approval": None
            if a is None
            else {
                "by": self.approved_by,
                "actor": a.decider[0],
                "via": a.decider[1],
                "at": a.at.isoformat(),
                "state": a.state,
                "anyway": a.anyway_by is not None,
                "note": a.last_error,
            },
            "held": self.held,
            "next": self.next.lines(),
            "ways_out": [command for command, _ in self.next.ways_out],
            "vms": [vars(v) for v in self.vms],
            "hooks": [vars(h) for h in self.hooks],
            "offers": [
                n
                for n, on in (
                    ("approve", self.approve),
                    ("anyway", self.anyway),
                    ("retry", self.retry),
                )
                if on
            ],
        }


class FleetRows:
    """Turns one read of the store into the page's rows.

    Args:
        me: this agent's VM name (always live to itself, as to its readiness gate).
        silent_after: [fleet] silent_after.
        timeout_of: a hook's timeout by name (this agent's [hooks]).
        dry_run: policy.dry_run (no hook runs; readiness says so).
        mask: the secrets hook output must not show (masked where it was made, and again).
    """

    def __init__(
        self,
        me: Callable[[], str],
        *,
        silent_after: timedelta,
        timeout_of: Callable[[str], float],
        dry_run: bool = False,
        mask: Masker | None = None,
    ) -> None:
        self._me = me
        self._silent_after = silent_after
        self._timeout_of = timeout_of
        self._dry_run = dry_run
        self._mask = mask or Masker()

    def rows(self, read: FleetRead, now: datetime) -> list[FleetEvent]:
        """Every event of `read`, as of `now`."""
        fleet = self.fleet(read, now)
        return [self.row(r, read, fleet, now) for r in read.events]

    def fleet(self, read: FleetRead, now: datetime) -> Agents:
        """The fleet's agents, live or silent as of `now`, as the readiness gate sorts them."""
        return agents(read.agents, self._me(), now, self._silent_after)

    def row(self, r: EventRecord, read: FleetRead, fleet: Agents, now: datetime) -> FleetEvent:
        """One event's row."""
        e = r.event
        runs = read.runs.get(e.event_id, [])
        ready = readiness(
            e,
            r.decision.prepare,
            runs,
            live=fleet.live,
            now=now,
            timeout_of=self._timeout_of,
            dry_run=self._dry_run,
            silent=fleet.silent,
        ).vms
        holding = would_hold(ready, r.decision.on_prepare_failure, r.policy)
        state = r.approval.state if r.approval else None
        later = outlook(
            e,
            approval=state,
            readiness=ready,
            now=now,
            over=not r.present,
            holding=r.blocker(holding=holding) == Blocker.WOULD_HOLD,
        )
        a = r.approval
        changes = read.changes.get(e.event_id) or Changes(0, r.last_seen, None)
        at = e.not_before or changes.started
        return FleetEvent(
            record=r,
            title=title(e),
            vms=_vms(e, ready, fleet),
            next=later,
            decided=decided(r.decision.action, r.decision.rule),
            approved_by=decider(
                a.actor, a.via, r.decision.rule, anyway_by=a.anyway_by, anyway_via=a.anyway_via
            )
            if a
            else "",
            hooks=tuple(self._hook(h) for h in runs),
            approve=r.blocker(holding=holding) is None and offers_approval(r.policy),
            anyway=offers_anyway(r.policy)
            and anyway_offered(
                approval=state, present=r.present, started=e.started, holding=holding
            ),
            retry=_retry(r, runs),
            changes=changes,
            not_before=at.astimezone(UTC) if at else None,
            countdown=until(at, now),
        )

    def _hook(self, h: HookRunRecord) -> HookRow:
        output = last_lines(self._mask.mask(h.run.output), lines=TAIL_LINES, limit=TAIL_LIMIT)
        return HookRow(
            h.run.vm,
            h.run.stage,
            h.run.hook,
            h.state,
            h.run.why,
            h.run.seconds,
            output,
            h.run.attempt,
        )


def _vms(event: ScheduledEvent, ready: Sequence[VmReadiness], fleet: Agents) -> tuple[VmRow, ...]:
    """Every listed VM with its agent and, when the rule prepares it, its readiness."""
    lines = {v.vm: v for v in ready}
    rows = []
    for vm in listed_vms(event):
        agent = agent_of(vm, fleet)
        v = lines.get(vm)
        # Its readiness without its name; where its agent is missing, `agent` says it all.
        said = v.line().removeprefix(f"{vm}: ") if v and v.state not in _ABSENT else ""
        rows.append(VmRow(vm, agent, said, str(v.state) if v else ""))
    return tuple(rows)


def agent_of(vm: str, fleet: Agents) -> str:
    """ "live", "silent since 2026-05-04 08:02 UTC" (its last beat), or "no agent"."""
    if vm in fleet.live:
        return "live"
    if vm in fleet.silent:
        return f"silent since {fleet.silent[vm].astimezone(UTC):%Y-%m-%d %H:%M} UTC"
    return "no agent"


def inputs(r: EventRecord, read: FleetRead, fleet: Agents) -> tuple[object, ...] | None:
    """All a row of `r` says but the times relative to now ("in 14 min"): equal inputs, equal
    calendar entries (web/calendar_feed.py keeps them). None when the row also depends on the
    time: a prepare hook running on a VM whose agent is not live is waited for until a time,
    then holds (hooks/readiness.py)."""
    e = r.event
    runs = tuple(read.runs.get(e.event_id, ()))
    if any(h.state == "running" and h.run.vm not in fleet.live for h in runs):
        return None
    return (
        e,
        r.state,
        r.decision,
        r.present,
        r.first_seen,
        r.gone_at,
        r.approval,
        runs,
        tuple(agent_of(vm, fleet) for vm in listed_vms(e)),
        read.changes.get(e.event_id),
    )


def _retry(r: EventRecord, runs: Sequence[HookRunRecord]) -> bool:
    """`hooks retry` would be taken (store/hook_retries.py): present, not started, nothing
    sent to Azure yet, and a prepare hook failed."""
    if not r.present or r.event.started:
        return False
    if r.approval is not None and r.approval.state in (*CARRIED_OUT, ApprovalState.POSTING):
        return False
    return any(h.run.stage == "prepare" and h.state == "failed" for h in runs)
