"""Who acts on what: the one place that says which part a happening wakes.

The daemon's parts each run on a thread of their own (the carrier, the
dispatcher's workers, the hook worker, the reminders); this wakes the right one
when an approval is stored or its outcome recorded, a hook begins or ends,
another agent commits, or the heartbeat says work may wait unannounced. Without
threads (`sebridge once`) the tick runs each part in order itself, so the hook
callbacks wake nobody.
See docs/ARCHITECTURE.md, "Threads".
"""

from __future__ import annotations

from dataclasses import dataclass

from sebridge.approval.carrier import Carrier
from sebridge.engine.dispatch import Dispatcher
from sebridge.engine.reminders import Reminders
from sebridge.hooks.worker import HookWorker

__all__ = ["Parts", "Wakeups"]


@dataclass
class Parts:
    """The parts that can be woken (bound once the daemon built them)."""

    carrier: Carrier
    dispatcher: Dispatcher
    worker: HookWorker
    reminders: Reminders


class Wakeups:
    """Wakes the daemon's parts; its methods are handed out as callbacks before the parts
    exist, and work once `bind` was called."""

    def __init__(self) -> None:
        self._parts: Parts | None = None

    def bind(self, parts: Parts) -> None:
        self._parts = parts

    @property
    def parts(self) -> Parts:
        assert self._parts is not None, "Wakeups.bind() was not called"
        return self._parts

    def heard(self, tables: frozenset[str]) -> None:
        """Commits were heard (store listener's thread); each table wakes who acts on it.
        New approvals go to the carrier (first: it wakes the dispatcher when it carried one
        out) and start this VM's prepare hooks; outbox rows go to the dispatcher even with
        an approval in the batch, since the carrier wakes nobody when it has nothing to
        carry out here. (A reminder looks for an approval when its lead comes; an
        approval held on another agent reminds from that agent, woken by `recorded`.)"""
        p = self.parts
        if "approvals" in tables:
            p.carrier.wake()
            p.worker.wake()
        if "hook_runs" in tables:
            p.carrier.wake()  # a VM's readiness changed
        if "hook_retries" in tables:
            p.worker.wake()  # failed prepare hooks are to run again (`sebridge hooks retry`)
        if "outbox" in tables:
            p.dispatcher.wake()

    def recorded(self) -> None:
        """An approval or its outcome was recorded here (carried out, waiting, held): its
        transition goes out, and the reminders look again, since a held event is reminded
        of from now on and one carried out no more (their next lead may have changed)."""
        self.parts.dispatcher.wake()
        self.parts.reminders.wake()

    def look_again(self) -> None:
        """Work may wait that no NOTIFY announced (the heartbeat says so)."""
        p = self.parts
        p.carrier.wake()
        p.dispatcher.wake()
        p.worker.wake()
        p.reminders.wake()

    def hooks_awaited(self) -> None:
        """An approval waits for this VM's prepare hooks: the worker looks now."""
        if self.parts.worker.threaded:
            self.parts.worker.wake()

    def hook_began(self) -> None:
        """A hook run began: its hook_started goes out."""
        if self.parts.worker.threaded:
            self.parts.dispatcher.wake()

    def hook_ended(self) -> None:
        """A hook run ended: the carrier may go on (or hold), and the messages say so."""
        if self.parts.worker.threaded:
            self.parts.carrier.wake()
            self.parts.dispatcher.wake()
