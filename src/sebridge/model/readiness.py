"""One VM's readiness as messages show it: the words the hooks, the gate and every sink share.

hooks/readiness.py works it out from the store's rows; messages
(model/message.py) carry it. See docs/ARCHITECTURE.md, "Readiness hooks".
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["VmReadiness", "VmState"]


class VmState(StrEnum):
    """One listed VM's readiness."""

    READY = "ready"  # every prepare hook succeeded
    WAITING = "waiting"  # its prepare hooks have not started yet
    PREPARING = "preparing"  # a prepare hook runs now
    FAILED = "failed"  # a prepare hook failed: `why` and `output` say how
    NO_AGENT = "no agent"  # no live sebridge agent on that VM: not waited for
    DRY_RUN = "dry run"  # [policy] dry_run: its hooks are never run, nothing waits for them


@dataclass(frozen=True)
class VmReadiness:
    """One VM's line: "vm1: ready", "vm2: failed: drain exit 1", "vm3: no agent"."""

    vm: str
    state: VmState
    hook: str = ""  # the hook running, failed or awaited
    why: str = ""  # for FAILED: exit code, timeout or could not start; WAITING: a retry's when
    output: str = ""  # for FAILED: the tail of the hook's output

    def line(self) -> str:
        """For people."""
        if self.state == VmState.FAILED:
            return f"{self.vm}: failed: {self.hook} {self.why}"
        if self.state == VmState.DRY_RUN:
            return f"{self.vm}: dry run ({self.hook} not run)"
        if self.state == VmState.WAITING and self.why:  # a failed hook that runs again
            return f"{self.vm}: waiting ({self.hook} {self.why})"
        if self.state in (VmState.PREPARING, VmState.WAITING):
            verb = "running" if self.state == VmState.PREPARING else "not started"
            return f"{self.vm}: {self.state} ({self.hook} {verb})"
        return f"{self.vm}: {self.state}"
