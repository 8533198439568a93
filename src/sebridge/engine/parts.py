"""The record of the daemon's parts, built once by the composition root (cli/assembly.py).

The Daemon (the tick) uses some of them, the Runner (their life) starts and stops
them, the integrations and pages are handed the ones they need: each takes them
from this record, none reaches through another for them. See docs/ARCHITECTURE.md,
"Composition root".
"""

from __future__ import annotations

from dataclasses import dataclass

from sebridge.approval.carrier import Carrier
from sebridge.approval.usecase import Approvals
from sebridge.engine.dispatch import Dispatcher
from sebridge.engine.metrics import Metrics
from sebridge.engine.reminders import Reminders
from sebridge.hooks.agent import AgentHooks
from sebridge.hooks.worker import HookWorker
from sebridge.kernel.redact import Masker
from sebridge.kernel.subscriptions import Subscriptions

__all__ = ["Parts"]


@dataclass(frozen=True)
class Parts:
    """The daemon's parts, each subscribed to the tables whose writes wake it.

    Args:
        metrics: what the daemon counts.
        subscriptions: who is woken by which table's writes (kernel/subscriptions.py).
        hooks: the readiness hooks, their gate and worker (hooks/agent.py).
        dispatcher: delivers the outbox to the sinks.
        reminders: records the reminders that come due.
        approvals: the approval use case the channels call.
        carrier: carries approvals out to IMDS.
        hook_mask: the secrets hooks' output must not show (config/masked.py).
    """

    metrics: Metrics
    subscriptions: Subscriptions
    hooks: AgentHooks
    dispatcher: Dispatcher
    reminders: Reminders
    approvals: Approvals
    carrier: Carrier
    hook_mask: Masker

    @property
    def hook_worker(self) -> HookWorker:
        """The thread that runs the hooks (hooks/worker.py)."""
        return self.hooks.worker
