"""GET /readyz: is this daemon able to do its job now? 200 when it is, 503 and why otherwise.

Ready: IMDS has answered at least once since the daemon started and answers now,
and the store answers. Both are asked through probes (web/probe.py): a GET of
the Scheduled Events document on a connection of its own, and the store probe
/healthz shares; each finding is at most 2 s old, and one that has not come within
2 s is "has not answered for N s". So an IMDS that fails or cannot be reached, and a
stopped or frozen store, make the daemon unready within 2 s of being asked. Unlike
/healthz it does not wait for IMDS to fail for ten poll intervals: a daemon that never
reached IMDS is not ready from its first second (on Kubernetes: a pod not on the host
network). See docs/ARCHITECTURE.md, "Metrics and probes".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sebridge.kernel.errors import ImdsError
from sebridge.web.health import store_finding, store_probe
from sebridge.web.probe import Probe

if TYPE_CHECKING:
    from sebridge.engine.runner import Runner
    from sebridge.imds.client import ImdsClient

__all__ = ["ReadyCheck", "imds_probe"]


def imds_probe(
    client: Callable[[], ImdsClient], monotonic: Callable[[], float] = time.monotonic
) -> Probe:
    """A GET of the Scheduled Events document on demand, through a client of its own (the
    poller's connection is the poller's), closed after each GET."""

    def get() -> str | None:
        imds = client()
        try:
            imds.get_document()
        except ImdsError as exc:
            return str(exc)
        finally:
            imds.close()
        return None

    return Probe("IMDS", get, monotonic=monotonic)


class ReadyCheck:
    """Builds the /readyz answer from the running daemon's state and its probes.

    Args:
        imds: the IMDS probe (None: the last poll's outcome alone, for tests of a daemon
            without an HTTP server).
        store: the store probe, shared with /healthz.
    """

    def __init__(
        self, runner: Runner, imds: Probe | None = None, store: Probe | None = None
    ) -> None:
        self._runner = runner
        self._imds = imds
        self._store = store or store_probe(runner)

    def report(self) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body): {"ready": bool} and, when not, "reasons"."""
        poll = self._runner.daemon.poll_state
        reasons = []
        if poll.last_ok is None:
            why = f": {poll.error}" if poll.error else ""
            reasons.append(f"IMDS has not answered yet{why}")
        else:
            failing = self._imds.finding() if self._imds else poll.error
            if failing:
                reasons.append(f"IMDS does not answer: {failing}")
        store_error = store_finding(self._runner, self._store)
        if store_error is not None:
            reasons.append(f"the store does not answer: {store_error}")
        if reasons:
            return 503, {"ready": False, "reasons": reasons}
        return 200, {"ready": True}
