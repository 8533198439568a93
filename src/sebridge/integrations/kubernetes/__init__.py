"""Kubernetes: an Event on the Node for each transition, and the node condition
`ScheduledMaintenance` while an event is open, for `kubectl describe node`.

Through the in-cluster API as the pod's service account (client.py). Nothing of
it is imported unless `[kubernetes] enabled = true`, so an agent on a VM loads
none of it. See docs/ARCHITECTURE.md, "Integrations".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sebridge.config.reader import Reader
from sebridge.integrations.base import Context, Core, Finding, Integration, TrialNote
from sebridge.integrations.kubernetes.settings import KubernetesSettings, validate

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sebridge.integrations.kubernetes.client import KubeApi
    from sebridge.model.message import Sink

__all__ = ["Kubernetes", "KubernetesSettings"]


class Kubernetes(Integration[KubernetesSettings]):
    """On with `enabled = true` in [kubernetes]."""

    name = "kubernetes"
    title = "Kubernetes"
    outbound = True
    once = "it keeps one condition on this VM's node"
    settings = KubernetesSettings

    def validate(self, settings: KubernetesSettings, rd: Reader, core: Core) -> KubernetesSettings:
        return validate(settings, rd)

    def sink(self, ctx: Context[KubernetesSettings]) -> Sink:
        from sebridge.integrations.kubernetes.sink import KubernetesSink

        return KubernetesSink(_api(ctx.settings))

    def check(self, ctx: Context[KubernetesSettings]) -> Sequence[Finding]:
        from sebridge.integrations.kubernetes.doctor import check_kubernetes

        return check_kubernetes(_api(ctx.settings))

    def send_test(self, ctx: Context[KubernetesSettings], note: TrialNote) -> Sequence[Finding]:
        from sebridge.integrations.kubernetes.trial import send_trial

        return [send_trial(_api(ctx.settings), note)]


def _api(s: KubernetesSettings) -> KubeApi:
    from sebridge.integrations.kubernetes.client import KubeApi

    return KubeApi(s.api_server, s.token_file, s.ca_file, s.timeout)
