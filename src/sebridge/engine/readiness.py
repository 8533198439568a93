"""GET /readyz: has this daemon started to do its job? 200 once it has, 503 and why otherwise.

Ready: IMDS has answered at least once since the daemon started, and the
store answers (the last tick could use it). Unlike /healthz it does not wait
for IMDS to fail for ten poll intervals: a daemon that never reached IMDS is
not ready from its first second (on Kubernetes: a pod not on the host network).
See docs/ARCHITECTURE.md, "Metrics and probes".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sebridge.engine.runner import Runner

__all__ = ["Readiness"]


class Readiness:
    """Builds the /readyz answer from the running daemon's state."""

    def __init__(self, runner: Runner) -> None:
        self._runner = runner

    def report(self) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body): {"ready": bool} and, when not, "reasons"."""
        poll = self._runner.daemon.poll_state
        reasons = []
        if poll.last_ok is None:
            why = f": {poll.error}" if poll.error else ""
            reasons.append(f"IMDS has not answered yet{why}")
        if self._runner.store_error is not None:
            reasons.append(f"the store does not answer: {self._runner.store_error}")
        if reasons:
            return 503, {"ready": False, "reasons": reasons}
        return 200, {"ready": True}
