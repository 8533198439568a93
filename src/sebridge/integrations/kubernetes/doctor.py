"""Kubernetes' part of `sebridge check`: the API server answers, and the service account
may do what the sink does.

The permissions are asked of the API server itself (SelfSubjectAccessReview,
which every authenticated account may create): one line per missing one,
naming the verb and the resource, so a cluster's RBAC that differs from
deploy/kubernetes/rbac.yaml shows here rather than at the first event.
"""

from __future__ import annotations

from sebridge.integrations.base import Finding
from sebridge.integrations.kubernetes.client import KubeApi
from sebridge.integrations.kubernetes.events import NAMESPACE
from sebridge.kernel.errors import DeliveryError

__all__ = ["NEEDED", "check_kubernetes"]

# (verb, group, resource, subresource, namespace): what the sink calls.
NEEDED = (
    ("list", "", "nodes", "", ""),
    ("get", "", "nodes", "", ""),
    ("patch", "", "nodes", "status", ""),
    ("create", "", "events", "", NAMESPACE),
)


def check_kubernetes(api: KubeApi) -> list[Finding]:
    try:
        return _check(api)
    except DeliveryError as exc:
        return [Finding("kubernetes", False, str(exc).removeprefix("kubernetes: "))]
    finally:
        api.close()


def _check(api: KubeApi) -> list[Finding]:
    answer = api.call("GET", "/api/v1/nodes?limit=1")
    if not answer.ok:
        raise api.error(answer, "list nodes")
    missing = []
    for verb, group, resource, sub, namespace in NEEDED:
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "verb": verb,
                    "group": group,
                    "resource": resource,
                    "subresource": sub,
                    "namespace": namespace,
                }
            },
        }
        answer = api.call("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review)
        if not answer.ok:
            raise api.error(answer, "review its own access (SelfSubjectAccessReview)")
        if not (answer.body or {}).get("status", {}).get("allowed"):
            what = resource + (f"/{sub}" if sub else "") + (f" in {namespace}" if namespace else "")
            missing.append(f"{verb} {what}")
    if missing:
        return [
            Finding(
                "kubernetes",
                False,
                f"the service account may not {', '.join(missing)}: apply"
                " deploy/kubernetes/rbac.yaml (it grants what sebridge calls)",
            )
        ]
    return [
        Finding(
            "kubernetes",
            True,
            f"API server {api.server} answered; the service account may list and get nodes,"
            f" patch their status and create Events in {NAMESPACE}",
        )
    ]
