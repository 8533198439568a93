"""Kubernetes sink: an Event on each node a transition concerns, and the node's condition.

For each node (nodes.py: the event's Resources, or the hook's VM, by providerID):
1. POST /api/v1/namespaces/default/events: the transition as an Event
   (events.py); 409 AlreadyExists means an earlier attempt made it: delivered.
2. GET /api/v1/nodes/<node>, then PATCH /api/v1/nodes/<node>/status (strategic
   merge) with the condition `ScheduledMaintenance` (condition.py): this event
   added or updated while it is open, removed once it ended (a node that is gone,
   as after a Terminate, has no condition left to keep). The patch carries
   the node's resourceVersion, so a concurrent change (the kubelet's status, another
   agent's event) makes it 409 Conflict: read again and patch again, up to
   CONFLICT_TRIES times. A patch that changes nothing is not sent.
One attempt per `send()` otherwise: the dispatcher retries (a retry repeats
nothing: same Event name, same condition). See docs/ARCHITECTURE.md, "Integrations".
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC
from typing import Any

from sebridge.integrations.kubernetes import condition as cond
from sebridge.integrations.kubernetes.client import MERGE_PATCH, KubeApi
from sebridge.integrations.kubernetes.events import NAMESPACE, event_body, event_name
from sebridge.integrations.kubernetes.nodes import Node, NodeFinder
from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.errors import RetryableDeliveryError
from sebridge.model import Receipt
from sebridge.model.message import Message, shown

__all__ = ["CONFLICT_TRIES", "KubernetesSink"]

CONFLICT_TRIES = 3


class KubernetesSink:
    """Posts Events and keeps the node condition, through `api` (client.KubeApi)."""

    def __init__(self, api: KubeApi, clock: Clock = utcnow) -> None:
        self._api = api
        self._clock = clock
        self.finder = NodeFinder(api)

    def check_templates(self) -> None:
        """No templates: Events are built in code (events.py)."""

    def send(self, message: Message) -> Receipt | None:
        """Deliver to every node the transition concerns. Raises a DeliveryError."""
        t = message.transition
        vms = (t.hook.vm,) if t.hook else t.event.resources
        safe = shown(message)  # IMDS's text displayable and bounded; names from `message`
        for node in self.finder.nodes(vms):
            self.post_event(node, message, safe)
            self.update_condition(node, message)
        return None

    def post_event(self, node: Node, message: Message, safe: Message | None = None) -> None:
        # The name from the message as stored, the text from the one safe to show.
        body = event_body(node, safe or shown(message), event_name(node, message))
        answer = self._api.call("POST", f"/api/v1/namespaces/{NAMESPACE}/events", body)
        if not answer.ok and not (answer.status == 409 and answer.reason == "AlreadyExists"):
            raise self._api.error(answer, f"create Events in {NAMESPACE}")

    def update_condition(self, node: Node, message: Message) -> None:
        entry = cond.entry_of(message)
        for _ in range(CONFLICT_TRIES):
            answer = self._api.call("GET", f"/api/v1/nodes/{node.name}")
            if answer.status == 404:  # the node is gone (a Terminate deleted its VM)
                return
            if not answer.ok:
                raise self._api.error(answer, f"get node {node.name}")
            patch = self._patch(answer.body or {}, message, entry)
            if patch is None:
                return
            answer = self._api.call(
                "PATCH", f"/api/v1/nodes/{node.name}/status", patch, content_type=MERGE_PATCH
            )
            if answer.ok or answer.status == 404:
                return
            if answer.status != 409:
                raise self._api.error(answer, f"patch node {node.name}'s status")
        raise RetryableDeliveryError(
            f"kubernetes: node {node.name} changed under {CONFLICT_TRIES} patches in a row;"
            " will retry"
        )

    def close(self) -> None:
        self._api.close()

    def _patch(
        self, node: dict[str, Any], message: Message, entry: cond.Entry | None
    ) -> dict[str, Any] | None:
        """The status patch, or None when the condition already says it."""
        current = next(
            (
                c
                for c in (node.get("status") or {}).get("conditions") or ()
                if c.get("type") == cond.TYPE
            ),
            None,
        )
        entries = cond.entries_of(str(current.get("message") or "")) if current else {}
        before = dict(entries)
        key = cond.safe_id(message.transition.event_id)
        if entry is None:
            entries.pop(key, None)
        else:
            old = entries.get(key)
            if old is not None and entry.not_before == "unknown":  # started: NotBefore is gone
                entry = replace(entry, not_before=old.not_before)
            entries[key] = entry
        status, reason, text = cond.condition(entries)
        if current is not None and entries == before and current.get("status") == status:
            return None
        now = self._clock().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        same = current is not None and current.get("status") == status
        changed = str(current.get("lastTransitionTime")) if same and current else now
        return {
            "metadata": {"resourceVersion": (node.get("metadata") or {}).get("resourceVersion")},
            "status": {
                "conditions": [
                    {
                        "type": cond.TYPE,
                        "status": status,
                        "reason": reason,
                        "message": text,
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": changed,
                    }
                ]
            },
        }
