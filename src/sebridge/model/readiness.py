"""One VM's readiness as messages show it: the words the hooks, the gate and every sink share.

hooks/readiness.py works it out from the store's rows; messages
(model/message.py) carry it. See docs/ARCHITECTURE.md, "Readiness hooks".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

__all__ = ["HOLDING", "NOT_READY", "VmReadiness", "VmState"]


class VmState(StrEnum):
    """One listed VM's readiness."""

    READY = "ready"  # every prepare hook succeeded
    WAITING = "waiting"  # its prepare hooks have not started yet
    PREPARING = "preparing"  # a prepare hook runs now
    FAILED = "failed"  # a prepare hook failed: `why` and `output` say how
    # No sebridge agent ever ran on that VM (none the fleet knows): it cannot be drained;
    # named everywhere, not waited for unless the rule says `require_agents`.
    NO_AGENT = "no agent"
    # Its agent stopped answering while a prepare hook ran: waited for `until` (the run's
    # start, the hook's timeout and a margin), then AGENT_SILENT (docs/ARCHITECTURE.md).
    SILENT = "stopped answering"
    DRY_RUN = "dry run"  # [policy] dry_run: its hooks are never run, nothing waits for them
    # Its agent is known to the fleet (ran within [fleet] known_for) but has not been heard
    # from within [fleet] silent_after (`since`: its last beat): it cannot drain, so it
    # holds an approval like a failed hook (docs/ARCHITECTURE.md, "The fleet").
    AGENT_SILENT = "agent silent"


# The states that hold an approval (nothing is sent to Azure until a way out is taken).
HOLDING = (VmState.FAILED, VmState.AGENT_SILENT)
# The states in which a listed VM is not ready to be released (NO_AGENT is not waited for
# unless a rule requires agents; DRY_RUN runs nothing).
NOT_READY = (
    VmState.FAILED,
    VmState.WAITING,
    VmState.PREPARING,
    VmState.SILENT,
    VmState.AGENT_SILENT,
)


@dataclass(frozen=True)
class VmReadiness:
    """One VM's line: "vm1: ready", "vm2: failed: drain exit 1", "vm3: no agent"."""

    vm: str
    state: VmState
    hook: str = ""  # the hook running, failed or awaited
    why: str = ""  # for FAILED: exit code, timeout or could not start; WAITING: a retry's when
    output: str = ""  # for FAILED: the tail of the hook's output
    # SILENT: waited for until then; NO_AGENT after SILENT: waited for until then, no longer.
    until: datetime | None = None
    # AGENT_SILENT: when its agent was last heard from.
    since: datetime | None = None

    def line(self) -> str:
        """For people."""
        if self.until is not None or self.state in (VmState.AGENT_SILENT, VmState.NO_AGENT):
            return self._absent_line()
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

    def _absent_line(self) -> str:
        """A VM no agent ever ran on ("web9: no agent: sebridge cannot drain it"); a known
        agent the fleet has not heard from ("web2: agent silent since 08:02 UTC"); a VM
        whose agent stopped answering during a hook: waited for until when."""
        if self.state == VmState.NO_AGENT and self.until is None:
            return f"{self.vm}: no agent: sebridge cannot drain it"
        if self.state == VmState.AGENT_SILENT:
            when = f"{self.since:%H:%M} UTC" if self.since is not None else "an unknown time"
            return f"{self.vm}: agent silent since {when}"
        until = self.until
        if self.state == VmState.SILENT:
            return (
                f"{self.vm}: waiting for {self.vm}, whose agent stopped answering during "
                f"{self.hook}, until {until:%H:%M:%S} UTC"
            )
        return (
            f"{self.vm}: no agent (it stopped answering during {self.hook}; "
            f"waited for until {until:%H:%M:%S} UTC)"
        )
