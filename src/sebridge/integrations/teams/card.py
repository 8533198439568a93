"""Teams cards from the teams/ templates: Adaptive Cards for Workflows, MessageCards for connectors.

The first sight of an event (scheduled, unplanned) and a change get the full
card (teams/card.j2) with the "Approve…" link while the event is
approvable; every later transition gets a short follow-up card
(teams/followup.j2), because a card posted through Workflows cannot be
edited. IMDS text is escaped for Teams markdown. Payloads stay under Teams'
28 KB: a long description is cut, then the resource list, then every text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from sebridge.integrations.render import Renderer
from sebridge.integrations.samples import sample_messages
from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.errors import PermanentDeliveryError
from sebridge.kernel.text import clip, map_text
from sebridge.model import TransitionKind
from sebridge.model.message import Message

__all__ = [
    "CARD",
    "FOLLOWUP",
    "MAX_PAYLOAD",
    "MESSAGECARD",
    "PAGE_LINK",
    "CardBuilder",
    "escape_markdown",
    "samples",
]

CARD = "teams/card.j2"
FOLLOWUP = "teams/followup.j2"
MESSAGECARD = "teams/messagecard.j2"
# The action of a held event's card: its page offers the ways out and Approve anyway.
PAGE_LINK = "Open the approval page…"
MAX_PAYLOAD = 28 * 1024  # Teams refuses (413) or drops messages above 28 KB
ADAPTIVE_TYPE = "application/vnd.microsoft.card.adaptive"
# (description characters, resource names) tried in turn until the payload fits.
_BUDGETS = ((2000, 20), (500, 10), (0, 3))
# Then, when every field is long and full of what JSON escapes (an emoji takes 12 bytes),
# every text of the message cut to this many characters: a short card arrives, where a
# full one would be refused.
_FIELD_CUTS = (100, 20)
_FULL = frozenset({TransitionKind.SCHEDULED, TransitionKind.UNPLANNED, TransitionKind.CHANGED})
_INLINE = re.compile(r"([\\`*_~\[\]<>])")
_LINE_START = re.compile(r"^(\s*)([-+#>]|\d+\.)", re.M)


def escape_markdown(value: object) -> str:
    """Backslash-escape what Teams markdown would read as emphasis, code, links, lists or
    headings, so IMDS text shows as written."""
    text = "" if value is None else str(value)
    text = _INLINE.sub(r"\\\1", text)
    return _LINE_START.sub(_escape_marker, text)


def _escape_marker(match: re.Match[str]) -> str:
    marker = match.group(2)  # "- ", "#", "12." at a line's start
    escaped = marker[:-1] + "\\." if marker.endswith(".") else "\\" + marker
    return match.group(1) + escaped


class CardBuilder:
    """Renders a message into a card (a dict) with the templates, within Teams' size limit."""

    def __init__(self, renderer: Renderer, clock: Clock = utcnow) -> None:
        self._renderer = renderer
        self._clock = clock
        renderer.add_filters(md=escape_markdown)

    @staticmethod
    def full(message: Message) -> bool:
        """Whether this transition gets the full card (else a follow-up)."""
        return message.transition.kind in _FULL

    def adaptive(self, message: Message) -> dict[str, Any]:
        """The Workflows payload: the card in a message envelope, at most MAX_PAYLOAD bytes."""
        name = CARD if self.full(message) else FOLLOWUP
        return self._fitted(
            name,
            message,
            lambda card: {
                "type": "message",
                "attachments": [
                    {"contentType": ADAPTIVE_TYPE, "contentUrl": None, "content": card}
                ],
            },
        )

    def messagecard(self, message: Message) -> dict[str, Any]:
        """Title, summary, text, color and facts of a MessageCard (pymsteams builds the rest)."""
        return self._fitted(MESSAGECARD, message, lambda card: card)

    def check_templates(self) -> None:
        """Render every template against sample messages now; a failure names the template."""
        for sample in samples():
            self.adaptive(sample)
            self.messagecard(sample)

    def _fitted(
        self, name: str, message: Message, wrap: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> dict[str, Any]:
        tries = [(message, *budget) for budget in _BUDGETS]
        tries += [(_cut(message, limit), *_BUDGETS[-1]) for limit in _FIELD_CUTS]
        for shown, description_limit, resource_limit in tries:
            card = self._render(name, shown, description_limit, resource_limit)
            payload = wrap(card)
            # Measured as the sink sends it: JSON with ASCII escapes, where
            # "é" takes 6 bytes and an emoji 12 (UTF-8 would say 2 and 4).
            if len(json.dumps(payload).encode()) <= MAX_PAYLOAD:
                return payload
        raise PermanentDeliveryError(
            f"teams: template {name} makes a card over Teams' 28 KB even with the description"
            " cut: shorten the template (or your override of it)"
        )

    def _render(
        self, name: str, message: Message, description_limit: int, resource_limit: int
    ) -> dict[str, Any]:
        t = message.transition
        now = self._clock()
        source = self._renderer.render_for(
            "teams",
            name,
            t=t,
            e=t.event,
            vm=message.vm_name,
            policy=message.policy,
            dry_run=message.dry_run,
            approvable=message.approvable,
            approve_url=message.approve_url if message.approvable else None,
            page_url=message.page_url,
            approved_by=message.approved_by,
            anyway_approved=message.decider[2],
            first=self.full(message),
            now=now,
            description_limit=description_limit,
            resource_limit=resource_limit,
            readiness=message.readiness,
            prepare=message.prepare,
            rule=message.rule,
            decided=message.decided,
            held=message.held,
            next=message.outlook(now),
        )
        try:
            card = json.loads(source)
        except ValueError as exc:
            raise PermanentDeliveryError(
                f"teams: template {name} did not produce valid JSON: {exc}"
            ) from None
        if not isinstance(card, dict):
            raise PermanentDeliveryError(f"teams: template {name} must produce a JSON object")
        return card


def _cut(message: Message, limit: int) -> Message:
    """`message` with each of its texts cut to `limit` characters (the approval link kept
    whole: cut, it would not work) and the readiness of three VMs at most."""
    cut = map_text(message, lambda text: clip(text, limit))
    return replace(cut, approve_url=message.approve_url, readiness=cut.readiness[:3])


def samples(vm: str = "vm1") -> list[Message]:
    """The core's sample messages with markdown to escape (template checks, rendering tests)."""
    description = "Host **update** [link](http://x) _under_ way\n- not a list\n1. nor this"
    return sample_messages(vm, description=description)
