"""The composition root of the daemon's parts: built here once, handed to who uses them.

build_parts() builds the record (engine/parts.py) and wires it: each part subscribed
to the tables whose writes wake it, the store's commits and IMDS's requests counted.
compose_daemon() gives the Daemon the parts its tick uses; cli/runtime.py builds
it from a Config and hands the same record to the Runner, which starts and stops
the parts. Tests and benches build daemons here too, with the keyword arguments
below. See docs/ARCHITECTURE.md, "Composition root".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING

from sebridge.approval.assembly import assemble
from sebridge.config.core import PolicyConfig
from sebridge.engine.daemon import Daemon
from sebridge.engine.dispatch import Dispatcher
from sebridge.engine.metrics import Metrics
from sebridge.engine.parts import Parts
from sebridge.engine.reminders import Reminders
from sebridge.hooks.agent import AgentHooks
from sebridge.hooks.gate import KNOWN_FOR, SILENT_AFTER
from sebridge.imds import ImdsClient
from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.redact import Masker
from sebridge.kernel.subscriptions import Subscriptions
from sebridge.model import ScheduledEvent
from sebridge.model.decision import Decision, sinks_for
from sebridge.model.message import Sink
from sebridge.policy import Policy
from sebridge.policy.compile import build_policy
from sebridge.store import Store

if TYPE_CHECKING:
    from sebridge.hooks.process import HookCommand

__all__ = ["build_parts", "compose_daemon"]


def compose_daemon(
    imds: ImdsClient,
    store: Store,
    sinks: Mapping[str, Sink],
    *,
    vm_name: str,
    policy: Policy | None = None,
    dry_run: bool = False,
    retry_for: timedelta = timedelta(hours=1),
    max_backoff: float = 300.0,
    clock: Clock = utcnow,
    approve_url: Callable[[ScheduledEvent], str] | None = None,
    hooks: Mapping[str, HookCommand] | None = None,
    metrics: Metrics | None = None,
    hook_mask: Masker | None = None,
    routes: Mapping[str, str] | None = None,
    fleet: tuple[timedelta, timedelta] = (KNOWN_FOR, SILENT_AFTER),
) -> Daemon:
    """A daemon and its parts (daemon.parts, for the Runner).

    Args:
        sinks: each sink by its integration's name (the outbox key).
        vm_name: this VM's name as Resources list it, known before the store was opened
            (cli/runtime.py: vm_name); the agent's identity, never a host name.
        approve_url: an event's signed approval link, for messages (None: links are off).
        hooks: the configured readiness hooks ([hooks.<name>]) by name.
        policy: the rules that decide each new event (policy/compile.py: build_policy);
            None: built-in rules with the default keys.
        metrics: what the daemon counts (default: a registry of its own).
        hook_mask: the secrets hooks' output must not show (config/masked.py).
        routes: each sink's route where not "default" (model/decision.py: sinks_for).
        fleet: [fleet] known_for and silent_after (hooks/gate.py).
    """
    if not vm_name:
        raise ValueError("the daemon needs this VM's name (cli/runtime.py: vm_name)")
    policy = policy or build_policy(PolicyConfig())
    names, by_route = tuple(sinks), dict(routes or {})

    def sinks_of(decision: Decision) -> tuple[str, ...]:
        return sinks_for(decision, names, by_route)

    parts = build_parts(
        imds,
        store,
        sinks,
        vm_name=vm_name,
        sinks_for=sinks_of,
        prepare_lead=timedelta(seconds=policy.prepare_lead_seconds),
        dry_run=dry_run,
        retry_for=retry_for,
        max_backoff=max_backoff,
        clock=clock,
        approve_url=approve_url,
        hooks=hooks,
        metrics=metrics,
        hook_mask=hook_mask,
        fleet=fleet,
    )
    return Daemon(
        imds, store, parts, vm_name=vm_name, sinks_for=sinks_of, policy=policy, clock=clock
    )


def build_parts(
    imds: ImdsClient,
    store: Store,
    sinks: Mapping[str, Sink],
    *,
    vm_name: str,
    sinks_for: Callable[[Decision], tuple[str, ...]],
    prepare_lead: timedelta,
    dry_run: bool,
    retry_for: timedelta,
    max_backoff: float,
    clock: Clock,
    approve_url: Callable[[ScheduledEvent], str] | None,
    hooks: Mapping[str, HookCommand] | None,
    metrics: Metrics | None,
    hook_mask: Masker | None,
    fleet: tuple[timedelta, timedelta],
) -> Parts:
    """The daemon's parts, each subscribed to what wakes it (as compose_daemon's args)."""
    metrics = metrics or Metrics(tuple(sinks))
    store.transitions.on_recorded(metrics.transition_recorded)
    imds.on_request(metrics.imds_requested)  # each attempt, retries apart
    mask = hook_mask or Masker()
    # Who is woken by which table's writes: each part says (its WAKES_ON); this
    # process's commits and, on PostgreSQL, every process's (Daemon.watch_store) publish.
    subscriptions = Subscriptions()
    agent = AgentHooks(
        store,
        hooks or {},
        lambda: vm_name,
        sinks_for=sinks_for,
        prepare_lead=prepare_lead,
        dry_run=dry_run,
        clock=clock,
        on_ended=metrics.hook_finished,
        mask=mask,
        fleet=fleet,
    )
    dispatcher = Dispatcher(
        store,
        sinks,
        vm_name=lambda: vm_name,
        dry_run=dry_run,
        retry_for=retry_for,
        max_backoff=max_backoff,
        clock=clock,
        approve_url=approve_url,
        readiness_of=agent.shown,
        metrics=metrics,
    )
    reminders = Reminders(store, sinks_for, clock=clock, holding=agent.holding)
    approvals, carrier = assemble(
        store,
        imds,
        sinks_for,
        carries=True,
        dry_run=dry_run,
        clock=clock,
        gate=agent.gate,
        batch=subscriptions.batch,
        metrics=metrics,
        readiness_of=lambda record: agent.gate.readiness(record).vms,
    )
    assert carrier is not None  # carries=True
    parts = Parts(metrics, subscriptions, agent, dispatcher, reminders, approvals, carrier, mask)
    for part, wake in (
        (carrier, carrier.look),  # its first round waits for the first tick
        (parts.hook_worker, parts.hook_worker.wake),
        (reminders, reminders.wake),
        (dispatcher, dispatcher.wake),
    ):
        subscriptions.subscribe(part.WAKES_ON, wake, own=part.on_own_thread)
    store.db.on_commit(subscriptions.publish)
    return parts
