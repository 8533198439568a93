"""Which Node a VM of IMDS's Resources is: by the node's providerID, never by its name.

Scheduled Events name VMs as Azure does (a scale set's instance is
`aks-nodepool1-12345678-vmss_3`); the node of that VM has another name
(`aks-nodepool1-12345678-vmss000003`) but its providerID names the VM:
`azure:///subscriptions/.../virtualMachineScaleSets/<set>/virtualMachines/<instance>`
(uniform scale sets) or `.../virtualMachines/<vm>` (single VMs, availability
sets, flexible scale sets). In a fleet any agent may deliver a transition of
any VM's event, so the agent finds the node from the VM's name, not from its
own. Nodes are listed once, and again when a VM is not among them (a node that
joined since), at most every REFRESH seconds. A VM that is no node of the
cluster (a plain VM in the same availability set) gets nothing.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sebridge.integrations.kubernetes.client import KubeApi

__all__ = ["REFRESH", "Node", "NodeFinder", "vm_of"]

REFRESH = 30.0  # seconds between two lists of the nodes while a VM is not found
_SCALE_SET = re.compile(r".*/virtualmachinescalesets/([^/]+)/virtualmachines/([^/]+)", re.I)
_VM = re.compile(r".*/virtualmachines/([^/]+)", re.I)


@dataclass(frozen=True)
class Node:
    name: str
    uid: str


def vm_of(provider_id: str) -> str:
    """The VM name IMDS's Resources give the node of this providerID (lowercase), or ""."""
    if not provider_id.lower().startswith("azure://"):
        return ""
    m = _SCALE_SET.fullmatch(provider_id)
    if m:
        return f"{m.group(1)}_{m.group(2)}".lower()
    m = _VM.fullmatch(provider_id)
    return m.group(1).lower() if m else ""


class NodeFinder:
    """VM names -> the cluster's nodes, from one list of the nodes kept between calls."""

    def __init__(self, api: KubeApi, clock: Callable[[], float] = time.monotonic) -> None:
        self._api = api
        self._clock = clock
        self._by_vm: dict[str, Node] = {}
        self._listed: float | None = None

    def nodes(self, vms: Iterable[str]) -> list[Node]:
        """The nodes of these VMs, in their order, each once. Raises DeliveryError when the
        nodes cannot be listed."""
        wanted = list(dict.fromkeys(vm.lower() for vm in vms))
        missing = any(vm not in self._by_vm for vm in wanted)
        if missing and (self._listed is None or self._clock() - self._listed >= REFRESH):
            self._list()
        return list({n.name: n for vm in wanted if (n := self._by_vm.get(vm))}.values())

    def _list(self) -> None:
        # resourceVersion=0: served from the API server's cache, not etcd.
        answer = self._api.call("GET", "/api/v1/nodes?resourceVersion=0")
        if not answer.ok:
            raise self._api.error(answer, "list nodes")
        by_vm: dict[str, Node] = {}
        for item in (answer.body or {}).get("items") or ():
            meta, spec = item.get("metadata") or {}, item.get("spec") or {}
            vm = vm_of(str(spec.get("providerID") or ""))
            if vm and meta.get("name"):
                by_vm[vm] = Node(str(meta["name"]), str(meta.get("uid") or ""))
        self._by_vm = by_vm
        self._listed = self._clock()
