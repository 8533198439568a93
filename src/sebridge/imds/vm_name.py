"""This VM's name as Scheduled Events' `Resources` list it, learnt before anything else.

The name is the agent's identity in the store (its sightings, its claims, the
one daemon of that name on a shared database), so it must be known before the
store is opened and must be the same at every start of one VM: never the host
name (on a scale set the host name is not the instance name `Resources`
lists), never a guess while IMDS is slow. `[imds] vm_name` gives it; else
IMDS's compute name is asked, retrying for a bounded time; then a
configuration error naming `imds.vm_name`. See docs/ARCHITECTURE.md, "Agent name".
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from sebridge.errors import ConfigError, ImdsError
from sebridge.imds.client import ImdsClient
from sebridge.kernel.backoff import backoff_delay

__all__ = ["NAME_WAIT", "learn_vm_name"]

# How long a start waits for IMDS to say the VM's name. IMDS answers in
# milliseconds; a VM whose IMDS is silent this long is better told at once
# (exit 2, systemd starts it again) than polling under a name it may not have.
NAME_WAIT = 30.0
_CALL_TIMEOUT = 5.0  # one attempt; IMDS answers in milliseconds


def learn_vm_name(
    endpoint: str,
    *,
    wait: float = NAME_WAIT,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """The compute name IMDS gives at `endpoint`, asked until it answers or `wait` seconds
    have passed. Raises ConfigError naming imds.vm_name (and why IMDS did not say)."""
    deadline = clock() + wait
    attempt = 0
    while True:
        left = deadline - clock()
        # Each attempt ends by the deadline: a hanging IMDS must not stretch the wait.
        timeout = max(0.1, min(_CALL_TIMEOUT, left))
        client = ImdsClient(
            endpoint, timeout=timeout, first_timeout=timeout, connect_timeout=timeout, retries=0
        )
        try:
            return client.instance_name()
        except ImdsError as exc:
            why = str(exc)
        finally:
            client.close()
        if clock() >= deadline:
            raise ConfigError(
                f"cannot learn this VM's name from IMDS at {endpoint} within {wait:g} s "
                f"({why}): set imds.vm_name to this VM's name as Scheduled Events' "
                "Resources list it"
            )
        pause = backoff_delay(attempt, base=0.25, cap=2.0, jitter=random.random())  # noqa: S311
        sleep(max(0.0, min(pause, deadline - clock())))
        attempt += 1
