"""Kubernetes' rig: the fake API server over HTTPS (tests/fakes/kubernetes.py), RBAC as
shipped; Events are JSON data, their message bounded."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from fakes.kubernetes import FakeKubernetes
from rigs.base import Rig, assert_displayable, registered, strings
from sebridge.integrations.kubernetes import Kubernetes
from sebridge.integrations.kubernetes.events import MESSAGE_LIMIT
from sebridge.model.message import Message

NODE = "aks-nodepool1-12345678-vmss000000"
# The contract's events list "vm0": a single VM's providerID names it.
PROVIDER = (
    "azure:///subscriptions/s/resourceGroups/mc/providers/Microsoft.Compute/virtualMachines/vm0"
)


class KubernetesRig(Rig):
    integration = registered(Kubernetes)
    throttles: ClassVar[Mapping[int, float]] = {429: 1.0}

    def __init__(self) -> None:
        super().__init__()
        self.fake = FakeKubernetes()
        self.fake.add_node(NODE, PROVIDER)

    def section(self) -> dict[str, Any]:
        return {
            "enabled": True,
            "api_server": self.fake.server,
            "token_file": str(self.fake.token_file),
            "ca_file": str(self.fake.ca_file),
        }

    def port(self) -> int:
        return self.fake.port

    def answer(self, status: int, retry_after: int | None = None) -> None:
        echo = {"kind": "Status", "code": status, "message": f"refused Bearer {self.fake.token}"}
        self.fake.fail_next(status, retry_after=retry_after, body=echo)

    def hang(self) -> None:
        self._held(self.fake.hold_next())

    def secrets(self) -> list[str]:
        return [self.fake.token]

    def delivered(self) -> int:
        return len(self.fake.events)

    def check_arrived(self, sent: Sequence[Message]) -> None:
        events = list(self.fake.events.values())
        assert len(events) == len(sent)  # one node lists vm0; the other VMs are no nodes
        assert all(len(e["message"]) <= MESSAGE_LIMIT for e in events)
        assert not self.fake.refused
        condition = self.fake.condition(NODE, "ScheduledMaintenance")
        assert condition is not None and condition["status"] == "True"
        # JSON data, shown by kubectl as text: nothing in it may act on a terminal.
        assert_displayable([s for e in events for s in strings(e)] + list(strings(condition)))
