"""The Kubernetes Event a transition becomes on a node (core/v1, in the "default" namespace).

Its name comes from the transition (`<node>.sebridge-<id>-<digest>`), so a retry
after a lost answer creates nothing new: the API server answers 409
AlreadyExists, and that is a delivery. Its reason is AKS's own where the fact is
the same (`VMEventScheduled`, `FreezeScheduled`, `NodeDrainStart`: an alert a
cluster admin keeps for AKS's node events hears sebridge's too); sebridge's own
facts say the event's type and what happened (`RebootApproved`, `FreezeHeld`,
`RedeployStartedUnready`). docs/channels/kubernetes.md's table of reasons is checked against
`reason()`. Type Warning for what needs a person.
Text comes from `shown(message)`: displayable, each field bounded; the message
is cut to what `kubectl describe` shows well.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC
from typing import Any

from sebridge.integrations.kubernetes.nodes import Node
from sebridge.kernel.text import clip
from sebridge.model import TransitionKind
from sebridge.model.message import Message

__all__ = ["NAMESPACE", "event_body", "event_name", "reason"]

NAMESPACE = "default"  # the only namespace that takes core/v1 Events about a Node
MESSAGE_LIMIT = 1024  # events.k8s.io's limit of a note; kubectl shows one line of it
_WARNING = frozenset(
    {
        TransitionKind.UNPLANNED,
        TransitionKind.PROBLEM,
        TransitionKind.HOOK_FAILED,
        TransitionKind.HELD,
        TransitionKind.STARTED_UNREADY,
    }
)


def reason(kind: str, event_type: str, stage: str = "") -> str:
    """The Event's reason for a transition of `kind` about an event of `event_type` (a
    hook's `stage`: "prepare" or "recover")."""
    if kind == TransitionKind.SCHEDULED:
        return "FreezeScheduled" if event_type == "Freeze" else "VMEventScheduled"
    if kind == TransitionKind.HOOK_STARTED and stage == "prepare":
        return "NodeDrainStart"  # prepare hooks drain the node (deploy/kubernetes's drain)
    prefix = re.sub(r"\W", "", event_type)[:40] or "Maintenance"
    return (prefix + "".join(w.capitalize() for w in kind.split("_")))[:128]


def event_name(node: Node, message: Message) -> str:
    """The Event's name: the same for every attempt at this transition on this node."""
    t = message.transition
    hook = t.hook
    key = "|".join(
        (
            t.event_id,
            t.kind,
            t.at.isoformat(),
            hook.vm if hook else "",
            str(hook.attempt) if hook else "",
        )
    )
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{node.name}.sebridge-{message.transition_id}-{digest}"[:253]


def event_body(node: Node, message: Message, name: str) -> dict[str, Any]:
    """The Event (core/v1) `name` for `message` on `node`; `message` already shown()."""
    t = message.transition
    at = t.at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/name": "sebridge"},
        },
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node.name, "uid": node.uid},
        "reason": reason(t.kind, t.event.event_type, t.hook.stage if t.hook else ""),
        "message": clip(_text(message), MESSAGE_LIMIT),
        "type": "Warning" if t.kind in _WARNING else "Normal",
        "source": {"component": "sebridge", "host": node.name},
        "firstTimestamp": at,
        "lastTimestamp": at,
        "count": 1,
    }


def _text(message: Message) -> str:
    t, e = message.transition, message.transition.event
    nb = e.not_before.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if e.not_before else None
    parts = [f"{e.event_type} {e.event_id}: {t.kind.replace('_', ' ')}"]
    parts.append(f"NotBefore {nb}" if nb else f"status {e.status}")
    if t.actor:
        parts.append(f"by {t.actor}" + (f" via {t.via}" if t.via else ""))
    if t.hook:
        h = t.hook
        ended = f", exit {h.exit_code}" if h.exit_code is not None else ""
        parts.append(
            f"hook {h.hook} ({h.stage}) on {h.vm}{ended}" + (", timed out" if h.timed_out else "")
        )
    if t.changes:
        parts.append("changed: " + ", ".join(t.changes))
    if t.note:
        parts.append(t.note)
    if e.description:
        parts.append(e.description)
    return "; ".join(parts)
