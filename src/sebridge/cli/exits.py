"""The exit codes of `sebridge` commands (docs/reference/cli.md lists them).

0 done; 1 something failed at run time (IMDS, store); 2 bad usage or configuration;
3 an approval was refused (unknown, gone, started, already approved); 4 an approval was
recorded and held (waiting for readiness, held by a failed hook, or not carried out yet);
130 interrupted (Ctrl-C); 141 the reader of its output went away (`sebridge events`
piped into `head`).
"""

from __future__ import annotations

__all__ = ["FAILED", "HELD", "INTERRUPTED", "OK", "OUTPUT_GONE", "REFUSED", "USAGE"]

OK, FAILED, USAGE, REFUSED, HELD = 0, 1, 2, 3, 4
INTERRUPTED, OUTPUT_GONE = 130, 141  # as a shell reports SIGINT and SIGPIPE: 128 + signal
