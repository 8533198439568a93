"""IMDS's part of `sebridge check`: the Scheduled Events document, and this VM's name.

IMDS is always asked for the document the daemon polls: a VM whose name is
configured (`[imds] vm_name`) still needs IMDS to answer. The name is the
agent's identity (docs/ARCHITECTURE.md, "Agent name"): without `vm_name` it
is learnt as `run` learns it, and told to the checks waiting for it (the
test messages name it); with `vm_name` it is compared with IMDS's compute
name when IMDS gives one. They may differ on purpose (Resources may spell
the name otherwise than compute.name does), so a difference is a warning
that says both, not a problem.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sebridge.cli.imds_client import build_imds
from sebridge.cli.runtime import vm_name
from sebridge.config.loader import Config
from sebridge.imds.vm_name import BRIEF_WAIT
from sebridge.integrations.base import Finding
from sebridge.kernel.errors import ConfigError, ImdsError
from sebridge.kernel.text import visible

__all__ = ["Caution", "check_imds"]


@dataclass(frozen=True)
class Caution:
    """Worth a person's look, not a problem: check's `warning:` line."""

    target: str
    message: str


def check_imds(
    config: Config,
    timeout: float,
    say: Callable[[Finding | Caution], None],
    named: Callable[[str], None],
) -> None:
    """GET the Scheduled Events document; learn or compare this VM's name.

    Args:
        timeout: check's whole deadline: the name is learnt within half of it at most,
            so the test messages waiting for it still have time to be posted.
        named: told this VM's name as soon as it is known ("" when IMDS does not say it).
    """
    given = config.imds.vm_name
    if given:
        named(given)
    else:
        learnt = _learn_name(config, min(BRIEF_WAIT, timeout / 2), say)
        named(learnt)
        if not learnt:  # its problem says why IMDS did not answer: said once
            return
    try:
        # Longer than the deadline: a hanging IMDS is said by the deadline's line, which
        # tells of its slow first request.
        client = build_imds(config, timeout=timeout + 1)
    except ValueError as exc:  # an api-version the client does not speak
        say(Finding("imds.api_version", False, str(exc)))
        return
    try:
        try:
            document = client.get_document()
        except ImdsError as exc:
            say(Finding("imds.endpoint", False, f"Scheduled Events did not answer: {exc}"))
            return
        count = len(document.events)
        say(
            Finding(
                "imds",
                True,
                f"Scheduled Events answered at {client.endpoint} (api-version"
                f" {config.imds.api_version}): {count} event{'' if count == 1 else 's'},"
                f" DocumentIncarnation {visible(str(document.incarnation))}",
            )
        )
        if given:
            say(_compare(given, client.instance_name))
    finally:
        client.close()


def _learn_name(config: Config, wait: float, say: Callable[[Finding | Caution], None]) -> str:
    """This VM's name as `run` learns it, asked for `wait` seconds; "" when IMDS does not
    say (a problem: `run` would exit 2)."""
    try:
        name = vm_name(config, wait=wait)
    except ConfigError as exc:
        say(Finding("imds.vm_name", False, f"not set, and `sebridge run` would exit 2: {exc}"))
        return ""
    said = f"this VM's name is {visible(name)} (IMDS's compute name; imds.vm_name is not set)"
    say(Finding("imds", True, said))
    return name


def _compare(given: str, compute_name: Callable[[], str]) -> Finding | Caution:
    try:
        name = compute_name()
    except ImdsError as exc:
        return Finding(
            "imds",
            True,
            f"imds.vm_name {visible(given)} is not compared: IMDS gave no compute name ({exc})",
        )
    if name == given:
        return Finding("imds", True, f"imds.vm_name {visible(given)} is IMDS's compute name")
    return Caution(
        "imds.vm_name",
        f"{visible(given)} differs from IMDS's compute name {visible(name)}: events are matched to"
        " this VM by imds.vm_name, as Scheduled Events' Resources name it (they may spell it"
        " otherwise than the compute name does); keep it if Resources list"
        f" {visible(given)}, else set it to {visible(name)}",
    )
