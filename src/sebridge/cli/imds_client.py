"""The IMDS client a command builds from `[imds]`: the daemon's, and a probe's, which
gives up sooner and retries once at most."""

from __future__ import annotations

from sebridge.config.loader import Config
from sebridge.imds import ImdsClient

__all__ = ["PROBE_TIMEOUT", "build_imds"]

# /readyz's IMDS GET gives up after this (its asker waits 2 s, web/probe.py): past
# IMDS's first answer a healthy GET takes milliseconds.
PROBE_TIMEOUT = 5.0


def build_imds(config: Config, *, timeout: float | None = None) -> ImdsClient:
    """The IMDS client from [imds]; `timeout`: every call's (first included), and one
    retry at most (a probe's client)."""
    if timeout is None:
        return ImdsClient(
            config.imds.endpoint, config.imds.api_version, timeout=config.imds.timeout
        )
    return ImdsClient(
        config.imds.endpoint,
        config.imds.api_version,
        timeout=timeout,
        first_timeout=timeout,
        retries=1,
    )
