"""`sebridge check --send-test` for Kubernetes: one Normal Event `SebridgeTest` on this VM's
node (`kubectl describe node` shows it). The node condition is not touched: it says
which events are open, and a test is none."""

from __future__ import annotations

import hashlib

from sebridge.integrations.base import Finding, TrialNote
from sebridge.integrations.kubernetes.client import KubeApi
from sebridge.integrations.kubernetes.events import NAMESPACE
from sebridge.integrations.kubernetes.nodes import NodeFinder
from sebridge.kernel.clock import utcnow
from sebridge.kernel.errors import DeliveryError
from sebridge.kernel.text import clip, displayable

__all__ = ["send_trial"]


def send_trial(api: KubeApi, note: TrialNote) -> Finding:
    try:
        nodes = NodeFinder(api).nodes([note.vm_name])
        if not nodes:
            return Finding(
                "kubernetes",
                False,
                f"no node of the cluster has {clip(displayable(note.vm_name), 100)}'s providerID:"
                " no test Event posted (is this agent on a node of the cluster?)",
            )
        (node,) = nodes
        at = utcnow()
        digest = hashlib.sha256(at.isoformat().encode()).hexdigest()[:12]
        stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{node.name}.sebridge-test-{digest}", "namespace": NAMESPACE},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Node",
                "name": node.name,
                "uid": node.uid,
            },
            "reason": "SebridgeTest",
            "message": clip(displayable(note.text), 1024),
            "type": "Normal",
            "source": {"component": "sebridge", "host": node.name},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        answer = api.call("POST", f"/api/v1/namespaces/{NAMESPACE}/events", body)
        if not answer.ok:
            raise api.error(answer, f"create Events in {NAMESPACE}")
    except DeliveryError as exc:
        said = str(exc).removeprefix("kubernetes: ").removesuffix("; will retry")
        return Finding("kubernetes", False, f"test Event not posted: {said}")
    finally:
        api.close()
    return Finding(
        "kubernetes",
        True,
        f"test Event SebridgeTest posted on node {node.name} (kubectl describe node {node.name})",
    )
