"""One exponential backoff with jitter, for every retry loop.

The outbox (dispatch) and the IMDS client both retry failures; the VMs of one
host, or the sinks of one daemon, see the same outage and must not retry in
step, hence the jitter. One formula keeps them alike:

    min(cap, base * 2 ** min(attempt, MAX_DOUBLINGS)) * (0.5 + jitter)

so with jitter drawn from [0, 1) the wait lies in [0.5, 1.5) times the capped
exponential.
"""

from __future__ import annotations

import math

__all__ = ["MAX_DOUBLINGS", "backoff_delay"]

# 2 ** 20 times the base (12 days at 1 s): beyond any sensible cap, and far from
# float overflow however many attempts a delivery piles up.
MAX_DOUBLINGS = 20


def backoff_delay(attempt: int, *, base: float, cap: float = math.inf, jitter: float) -> float:
    """Seconds to wait before retry number `attempt` (0 = the first retry), jitter in [0, 1)."""
    if attempt < 0:
        raise ValueError(f"attempt must be 0 or more, not {attempt}")
    return min(cap, base * 2.0 ** min(attempt, MAX_DOUBLINGS)) * (0.5 + jitter)
