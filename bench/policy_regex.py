"""A rule's description pattern against hostile Descriptions: RE2 (config/pattern.py) against
Python's re, which the rules used before, in the same run.

Each pattern is searched in a 1 MB Description built to make a backtracking engine work
hardest ("a" repeated, then a character that fails the match); Python's re gets the
same pattern against 16 to 24 characters only (each further character doubles its time).

    python bench/policy_regex.py
"""

from __future__ import annotations

import re
import statistics
import sys
import time

from sebridge.config.pattern import user_pattern

PATTERNS = ("^(a+)+$", "(a|aa)+$", "(a*)*b", "maint.*(reboot|redeploy)", "host")
MEGABYTE = "a" * 1_000_000 + "!"
TARGET_S = 0.050  # "matching a 1 MB Description against any accepted rule takes milliseconds"


def seconds(fn: object, text: str, rounds: int = 5) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn(text)  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    print(f"{'pattern':28} {'RE2, 1 MB':>12} {'re, 16 ch':>12} {'re, 20 ch':>12} {'re, 24 ch':>12}")
    worst = 0.0
    for pattern in PATTERNS:
        ours = seconds(user_pattern(pattern).search, MEGABYTE)
        worst = max(worst, ours)
        old = re.compile(pattern, re.IGNORECASE)
        theirs = [seconds(old.search, "a" * n + "!", rounds=1) for n in (16, 20, 24)]
        print(
            f"{pattern:28} {ours * 1000:>9.2f} ms"
            + "".join(f" {t * 1000:>9.2f} ms" for t in theirs)
        )
    verdict = "PASS" if worst <= TARGET_S else "MISS"
    target = f"target <= {TARGET_S * 1000:.0f} ms"
    print(f"\nworst RE2 search of 1 MB: {worst * 1000:.2f} ms ({target}) {verdict}")
    return 0 if worst <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
