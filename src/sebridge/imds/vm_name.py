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

import logging
import random
import time
from collections.abc import Callable

from sebridge.imds.client import ImdsClient
from sebridge.kernel.backoff import backoff_delay
from sebridge.kernel.errors import ConfigError, ImdsError, ImdsTimeoutError

__all__ = ["BRIEF_WAIT", "NAME_WAIT", "learn_vm_name"]

log = logging.getLogger(__name__)

# How long a start waits for IMDS to say the VM's name. IMDS answers in
# milliseconds; a VM whose IMDS is silent this long is better told at once
# (exit 2, systemd starts it again) than polling under a name it may not have.
NAME_WAIT = 30.0
# A command that only looks (check, policy explain) asks this long: it says what `run`
# would find without making a person wait as long as a start does.
BRIEF_WAIT = 3.0
_CALL_TIMEOUT = 5.0  # one attempt; IMDS answers in milliseconds


def learn_vm_name(
    endpoint: str,
    *,
    wait: float = NAME_WAIT,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    announce: bool = False,
) -> str:
    """The compute name IMDS gives at `endpoint`, asked until it answers or `wait` seconds
    have passed. Raises ConfigError naming imds.vm_name (and why IMDS did not say).

    announce: log that the wait begins (a start: it may last `wait` seconds)."""
    if announce:
        log.info(
            "asking IMDS at %s for this VM's name (imds.vm_name is not set), for up to %g s",
            endpoint,
            wait,
        )
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
        except ImdsTimeoutError:  # its text names the attempt's share of the wait, not it
            why = "it did not answer; it is slow or hanging"
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
