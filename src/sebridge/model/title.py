"""An event's title, in one wording for every summary, subject, card and heading.

A title names the VMs the event lists (its Resources), in IMDS's order, never the
VM of the agent that happens to deliver the message: in a fleet any agent may
deliver an event's message, and the same event must read the same from each.
A long list is cut: "Reboot of web1, web2 and 8 more". Pure: each sink escapes
these words its own way. See docs/ARCHITECTURE.md, "What happens next".
"""

from __future__ import annotations

from collections.abc import Sequence

from sebridge.model import ScheduledEvent

__all__ = ["TITLE_VMS", "title", "title_vms"]

TITLE_VMS = 3  # names a title shows in full; a longer list shows two and "N more"


def title_vms(resources: Sequence[str], limit: int = TITLE_VMS) -> str:
    """ "web9"; "web1, web2, web3"; "web1, web2 and 8 more" (over `limit` names: one
    fewer, so "and N more" always stands for at least two); "no VMs listed"."""
    names = list(resources)
    if not names:
        return "no VMs listed"
    if len(names) <= limit:
        return ", ".join(names)
    shown = names[: max(limit - 1, 1)]
    return f"{', '.join(shown)} and {len(names) - len(shown)} more"


def title(event: ScheduledEvent) -> str:
    """ "Redeploy of web9", "Reboot of web1, web2, web3", "Reboot of web1, web2 and 8 more"."""
    return f"{event.event_type} of {title_vms(event.resources)}"
