"""CPU time per poll of an unchanged document: ImdsClient vs Microsoft's documented sample.

The simulator runs in a child process, so only the client's own CPU time is
counted. The baseline is the documentation's way: `requests.get(...)` per
poll (a new session and connection each time) and `resp.json()` each time.

    python bench/poll_cost.py [--polls 2000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable

import requests

from sebridge.imds import ImdsClient


def start_simulator() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "sebridge", "simulate", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()  # "sebridge simulator listening on http://HOST:PORT ..."
    url = next(word for word in first.split() if word.startswith("http://"))
    return proc, url


def cpu_per_call(fn: Callable[[], object], calls: int) -> float:
    for _ in range(min(50, calls)):  # warm up: imports, first connection
        fn()
    start = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--polls", type=int, default=2000)
    args = parser.parse_args()
    proc, url = start_simulator()
    try:
        client = ImdsClient(url)

        def ours() -> object:
            return client.get_document()

        def sample() -> object:
            # Verbatim from the 2020-07-01 documentation's get_scheduled_events().
            resp = requests.get(
                url + "/metadata/scheduledevents",
                headers={"Metadata": "true"},
                params={"api-version": "2020-07-01"},
            )
            return resp.json()

        ours_s = cpu_per_call(ours, args.polls)
        sample_s = cpu_per_call(sample, max(1, args.polls // 2))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    print(f"polls measured: {args.polls} (ours), {max(1, args.polls // 2)} (sample)")
    print(f"ImdsClient.get_document   {ours_s * 1e6:8.1f} us CPU per poll")
    print(f"documented sample         {sample_s * 1e6:8.1f} us CPU per poll")
    print(f"ratio ours/sample         {ours_s / sample_s:8.2f}x (budget <= 0.80x)")


if __name__ == "__main__":
    main()
