"""Prometheus metrics of one daemon: every name and every label set, in one place.

The names and labels are a contract (docs/reference/metrics.md, generated from here).
Every label value comes from a small fixed set declared here: never an event id, a VM name, a
person or an error text (a per-event label grows without bound). Counters
whose label values are known start at zero. The figures are plain numbers
kept here (a count costs a dict lookup, not prometheus_client's label
lookups); web/metrics_export.py turns them into Prometheus families at
scrape time (`registry_of`), and is imported, with prometheus_client, only by
the /metrics route (and tests): a daemon that serves no HTTP never loads it.
Each daemon has its own registry: nothing is registered globally. The gauges
read from the store are collected by web/store_gauges.py. See docs/ARCHITECTURE.md, "Metrics".
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime

from sebridge.imds.client import REQUEST_OUTCOMES
from sebridge.model import TransitionKind
from sebridge.model.approval import ApprovalState, OutcomeKind

__all__ = [
    "APPROVAL_OUTCOMES",
    "DELIVERY_BUCKETS",
    "DELIVERY_OUTCOMES",
    "HOOK_OUTCOMES",
    "HOOK_STAGES",
    "POLL_OUTCOMES",
    "REQUEST_OUTCOMES",
    "VIAS",
    "Metrics",
]

POLL_OUTCOMES = ("changed", "unchanged", "error")
DELIVERY_OUTCOMES = ("delivered", "retry", "failed")
VIAS = ("slack", "link", "page", "jira", "cli", "policy", "demo")
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


class Latencies:
    """One histogram's figures: a count per bucket (not cumulative), the count, the sum."""

    def __init__(self) -> None:
        self.buckets = [0] * (len(DELIVERY_BUCKETS) + 1)  # the last: above every bound
        self.count = 0
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        index = next(
            (i for i, bound in enumerate(DELIVERY_BUCKETS) if seconds <= bound),
            len(DELIVERY_BUCKETS),
        )
        self.buckets[index] += 1
        self.count += 1
        self.total += seconds


class Metrics:
    """The counters, histograms and gauges one daemon updates (from any thread).

    Args:
        sinks: the names of the enabled sinks (their integrations' names): the `sink`
            label's values.

    Each counter is a dict from its label values (a tuple, in the order the family
    names its labels) to a count, in the order the samples are shown.
    """

    def __init__(self, sinks: Sequence[str] = ()) -> None:
        self.sinks = tuple(sinks)
        self._lock = threading.Lock()  # a count is a read and a write: one at a time
        self.polls: dict[tuple[str, ...], float] = {(o,): 0.0 for o in POLL_OUTCOMES}
        # The unchanged polls the poll thread ends itself (quiet_poll): a plain count, that
        # thread its only writer, added to polls' "unchanged" at scrape time.
        self.quiet_polls = 0
        # When IMDS last answered, kept as read; a scrape turns it into Unix time.
        self.last_ok: datetime | None = None
        self.imds_requests: dict[tuple[str, ...], float] = {(o,): 0.0 for o in REQUEST_OUTCOMES}
        self.transitions: dict[tuple[str, ...], float] = {(k.value,): 0.0 for k in TransitionKind}
        self.deliveries: dict[tuple[str, ...], float] = {
            (sink, outcome): 0.0 for sink in self.sinks for outcome in DELIVERY_OUTCOMES
        }
        self.delivery_seconds: dict[str, Latencies] = {sink: Latencies() for sink in self.sinks}
        self.approvals: dict[tuple[str, ...], float] = {
            (via, outcome): 0.0 for via in VIAS for outcome in APPROVAL_OUTCOMES
        }
        self.hooks: dict[tuple[str, ...], float] = {
            (stage, outcome): 0.0 for stage in HOOK_STAGES for outcome in HOOK_OUTCOMES
        }

    def polled(self, outcome: str, at: datetime | None = None) -> None:
        """One IMDS poll: "changed", "unchanged" or "error"; `at` when IMDS answered."""
        self._count(self.polls, (_known(outcome, POLL_OUTCOMES),))
        if at is not None:
            self.last_ok = at

    def quiet_poll(self, at: datetime) -> None:
        """One unchanged poll that IMDS answered at `at`, from the poll thread alone
        (Daemon.quiet): the most frequent count, so it takes no lock and checks no label
        (an unchanged poll costs little else, issue 26); one writer loses no count."""
        self.quiet_polls += 1
        self.last_ok = at

    @property
    def last_success(self) -> float:
        """Unix time of the last poll that IMDS answered (0: none yet)."""
        last = self.last_ok
        return 0.0 if last is None else last.timestamp()

    def poll_counts(self) -> dict[tuple[str, ...], float]:
        """The polls by outcome, the poll thread's unchanged ones included (call it under
        the lock, for one consistent reading)."""
        counts = dict(self.polls)
        counts[("unchanged",)] += self.quiet_polls
        return counts

    def imds_requested(self, outcome: str) -> None:
        """One HTTP attempt of the daemon's IMDS client (its on_request): "ok", "retry",
        "throttled" or "error" (imds/client.py, REQUEST_OUTCOMES)."""
        self._count(self.imds_requests, (_known(outcome, REQUEST_OUTCOMES),))

    def transition_recorded(self, kind: str) -> None:
        """A transition was committed by this agent."""
        self._count(self.transitions, (TransitionKind(kind).value,))

    def delivered(self, sink: str, seconds: float) -> None:
        """A sink took a delivery `seconds` after its transition was recorded."""
        name = self._sink(sink)
        self._count(self.deliveries, (name, "delivered"))
        with self._lock:
            latencies = self.delivery_seconds.get(name)
            if latencies is None:
                latencies = self.delivery_seconds[name] = Latencies()
            latencies.observe(max(0.0, seconds))

    def delivery_failed(self, sink: str, *, retry: bool) -> None:
        """A delivery attempt failed: to be retried, or for good."""
        outcome = "retry" if retry else "failed"
        self._count(self.deliveries, (self._sink(sink), outcome))

    def approval_settled(self, via: str, outcome: str) -> None:
        """An approval came to `outcome` (OutcomeKind's values) through channel `via`."""
        label = via if via in VIAS else OTHER_VIA
        self._count(self.approvals, (label, _known(outcome, APPROVAL_OUTCOMES)))

    def approval_ended(self, via: str, state: str) -> None:
        """The carrier recorded an approval's state: an end state counts as its outcome
        (posted, dry run: approved; failed, abandoned: refused; held); others do not."""
        outcome = _ENDED.get(state)
        if outcome is not None:
            self.approval_settled(via, outcome)

    def hook_finished(self, stage: str, outcome: str) -> None:
        """A readiness hook ended: stage "prepare" or "recover", outcome "succeeded",
        "failed" or "timeout" (the hook runner calls this)."""
        self._count(self.hooks, (_known(stage, HOOK_STAGES), _known(outcome, HOOK_OUTCOMES)))

    def _count(self, counter: dict[tuple[str, ...], float], labels: tuple[str, ...]) -> None:
        with self._lock:
            counter[labels] = counter.get(labels, 0.0) + 1

    def _sink(self, name: str) -> str:
        # Sink names are the registry's integration names: a fixed set.
        return _known(name, self.sinks) if self.sinks else name


def _known(value: str, allowed: Sequence[str]) -> str:
    """`value`, which must be one of `allowed`: a label value never comes from elsewhere."""
    if value not in allowed:
        raise ValueError(f"{value!r} is not one of {', '.join(allowed)}")
    return value
