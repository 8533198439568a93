"""The exit codes of `sebridge` commands (README's command table lists them).

0 done; 1 something failed at run time (IMDS, store); 2 bad usage or configuration;
3 an approval was refused (unknown, gone, started, already approved); 4 an approval was
recorded and held (waiting for readiness, held by a failed hook, or not carried out yet).
"""

from __future__ import annotations

__all__ = ["FAILED", "HELD", "OK", "REFUSED", "USAGE"]

OK, FAILED, USAGE, REFUSED, HELD = 0, 1, 2, 3, 4
