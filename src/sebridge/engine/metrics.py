"""Prometheus metrics of one daemon: every name and every label set, in one place.

The names and labels are a contract (README, "Metrics"). Every label value
comes from a small fixed set declared here: never an event id, a VM name, a
person or an error text (a per-event label grows without bound). Counters
whose label values are known start at zero. Each daemon has its own
CollectorRegistry: nothing is registered globally. The gauges read from the
store are collected by engine/store_gauges.py. See docs/ARCHITECTURE.md, "Metrics".
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics

from sebridge import __version__
from sebridge.model import TransitionKind
from sebridge.model.approval import ApprovalState, OutcomeKind

__all__ = [
    "APPROVAL_OUTCOMES",
    "DELIVERY_OUTCOMES",
    "HOOK_OUTCOMES",
    "HOOK_STAGES",
    "POLL_OUTCOMES",
    "VIAS",
    "Metrics",
]

POLL_OUTCOMES = ("changed", "unchanged", "error")
DELIVERY_OUTCOMES = ("delivered", "retry", "failed")
VIAS = ("slack", "link", "jira", "cli", "policy", "demo")
APPROVAL_OUTCOMES = tuple(kind.value for kind in OutcomeKind)
HOOK_STAGES = ("prepare", "recover")
HOOK_OUTCOMES = ("succeeded", "failed", "timeout")
# A channel not in VIAS (an integration added later) is counted here, never by its own name.
OTHER_VIA = "other"
# Transition recorded -> delivered: a healthy sink takes well under a second; a sink that is
# down stretches it by its retries (backoff up to 5 min, then as long as the event lives).
DELIVERY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0, 3600.0)

# What an approval's end state counts as (pending, posting, waiting: not settled yet).
_ENDED: dict[str, str] = {
    ApprovalState.POSTED: OutcomeKind.APPROVED,
    ApprovalState.DRY_RUN: OutcomeKind.APPROVED,
    ApprovalState.FAILED: OutcomeKind.REFUSED,
    ApprovalState.ABANDONED: OutcomeKind.REFUSED,
    ApprovalState.HELD: OutcomeKind.HELD,  # a prepare hook failed: nothing was sent
}
# The `_created` twin of every counter and histogram is not part of the contract, and would
# double what a scrape carries.
disable_created_metrics()  # type: ignore[no-untyped-call]


class Metrics:
    """The counters, histograms and gauges one daemon updates.

    Args:
        sinks: the names of the enabled sinks (their integrations' names): the `sink`
            label's values.
        registry: where they are registered; a new one by default (one per daemon).
    """

    def __init__(self, sinks: Sequence[str] = (), registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        self.sinks = tuple(sinks)
        r = self.registry
        self._polls = Counter(
            "sebridge_imds_polls", "IMDS polls by outcome.", ["outcome"], registry=r
        )
        self._last_success = Gauge(
            "sebridge_imds_last_success_timestamp_seconds",
            "Unix time of the last IMDS poll that answered (0: none yet).",
            registry=r,
        )
        self._transitions = Counter(
            "sebridge_transitions",
            "Transitions this agent recorded (in a fleet, the first agent to record one).",
            ["kind"],
            registry=r,
        )
        self._deliveries = Counter(
            "sebridge_deliveries",
            "Delivery attempts by sink and outcome.",
            ["sink", "outcome"],
            registry=r,
        )
        self._delivery_seconds = Histogram(
            "sebridge_delivery_seconds",
            "Seconds from a transition being recorded to its delivery, by sink.",
            ["sink"],
            buckets=DELIVERY_BUCKETS,
            registry=r,
        )
        self._approvals = Counter(
            "sebridge_approvals",
            "Approvals by channel and what became of them, counted by the process that "
            "settled them.",
            ["via", "outcome"],
            registry=r,
        )
        self._hooks = Counter(
            "sebridge_hooks",
            "Readiness hook runs by stage and outcome.",
            ["stage", "outcome"],
            registry=r,
        )
        build = Gauge("sebridge_build_info", "sebridge's version.", ["version"], registry=r)
        build.labels(version=__version__).set(1)
        self._zero()

    def _zero(self) -> None:
        for outcome in POLL_OUTCOMES:
            self._polls.labels(outcome=outcome)
        for kind in TransitionKind:
            self._transitions.labels(kind=kind.value)
        for sink in self.sinks:
            self._delivery_seconds.labels(sink=sink)
            for outcome in DELIVERY_OUTCOMES:
                self._deliveries.labels(sink=sink, outcome=outcome)
        for via in VIAS:
            for outcome in APPROVAL_OUTCOMES:
                self._approvals.labels(via=via, outcome=outcome)
        for stage in HOOK_STAGES:
            for outcome in HOOK_OUTCOMES:
                self._hooks.labels(stage=stage, outcome=outcome)

    def polled(self, outcome: str, at: datetime | None = None) -> None:
        """One IMDS poll: "changed", "unchanged" or "error"; `at` when IMDS answered."""
        self._polls.labels(outcome=_known(outcome, POLL_OUTCOMES)).inc()
        if at is not None:
            self._last_success.set(at.timestamp())

    def transition_recorded(self, kind: str) -> None:
        """A transition was committed by this agent."""
        self._transitions.labels(kind=TransitionKind(kind).value).inc()

    def delivered(self, sink: str, seconds: float) -> None:
        """A sink took a delivery `seconds` after its transition was recorded."""
        self._deliveries.labels(sink=self._sink(sink), outcome="delivered").inc()
        self._delivery_seconds.labels(sink=self._sink(sink)).observe(max(0.0, seconds))

    def delivery_failed(self, sink: str, *, retry: bool) -> None:
        """A delivery attempt failed: to be retried, or for good."""
        outcome = "retry" if retry else "failed"
        self._deliveries.labels(sink=self._sink(sink), outcome=outcome).inc()

    def approval_settled(self, via: str, outcome: str) -> None:
        """An approval came to `outcome` (OutcomeKind's values) through channel `via`."""
        label = via if via in VIAS else OTHER_VIA
        self._approvals.labels(via=label, outcome=_known(outcome, APPROVAL_OUTCOMES)).inc()

    def approval_ended(self, via: str, state: str) -> None:
        """The carrier recorded an approval's state: an end state counts as its outcome
        (posted, dry run: approved; failed, abandoned: refused; held); others do not."""
        outcome = _ENDED.get(state)
        if outcome is not None:
            self.approval_settled(via, outcome)

    def hook_finished(self, stage: str, outcome: str) -> None:
        """A readiness hook ended: stage "prepare" or "recover", outcome "succeeded",
        "failed" or "timeout" (the hook runner calls this)."""
        self._hooks.labels(
            stage=_known(stage, HOOK_STAGES), outcome=_known(outcome, HOOK_OUTCOMES)
        ).inc()

    def _sink(self, name: str) -> str:
        # Sink names are the registry's integration names: a fixed set.
        return _known(name, self.sinks) if self.sinks else name


def _known(value: str, allowed: Sequence[str]) -> str:
    """`value`, which must be one of `allowed`: a label value never comes from elsewhere."""
    if value not in allowed:
        raise ValueError(f"{value!r} is not one of {', '.join(allowed)}")
    return value
