"""Whether the store answers, as the daemon's threads find out: said in the log once when
it stops, and once when it answers again, as plain lines (no traceback), whichever thread
noticed (the recorder, the heartbeat, /healthz's probe). /healthz shows it meanwhile.
See docs/ARCHITECTURE.md, "Guarantees".
"""

from __future__ import annotations

import logging
import threading

from sebridge.kernel.errors import StoreError

__all__ = ["StoreOutage"]

log = logging.getLogger("sebridge.daemon")


class StoreOutage:
    """The store's state as last found: `error` is why it does not answer, None while it does."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.error: str | None = None

    def failed(self, exc: StoreError) -> None:
        """A statement failed because the store is away (not a bug: that is the caller's)."""
        with self._lock:
            if self.error is None:
                log.warning("the store does not answer (%s); polling IMDS goes on", exc)
            self.error = str(exc)

    def answered(self) -> None:
        """A statement succeeded."""
        with self._lock:
            if self.error is not None:
                log.info("the store answers again")
            self.error = None
