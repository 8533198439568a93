"""[kubernetes]: where the API server is and how the pod proves who it is.

Off unless `enabled = true`. In a pod, leave `api_server` empty: it is then
https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT (the variables the
kubelet sets in every container), read with the rest of the configuration. The
token and the CA are the files Kubernetes mounts into every pod of a service
account; the token is read again before each delivery, because the kubelet
rotates it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sebridge.config.durations import Seconds
from sebridge.config.reader import Reader, option

__all__ = ["SERVICE_ACCOUNT", "KubernetesSettings", "validate"]

SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


@dataclass(frozen=True)
class KubernetesSettings:
    """[kubernetes]: Events and a node condition for `kubectl describe node`."""

    # true: on (the pod's service account needs deploy/kubernetes/rbac.yaml).
    enabled: bool = False
    # https://host:port of the API server; empty: the in-cluster address,
    # https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT.
    api_server: str = ""
    # The service account's token, read again before each call (the kubelet rotates it).
    token_file: str = f"{SERVICE_ACCOUNT}/token"
    # The CA that signed the API server's certificate.
    ca_file: str = f"{SERVICE_ACCOUNT}/ca.crt"
    # Seconds to wait for the API server's answer.
    timeout: Seconds = option(10.0, gt=0.0, le=120.0)


def validate(s: KubernetesSettings, rd: Reader) -> KubernetesSettings:
    """The API server's URL: given (https only), or the pod's in-cluster address."""
    if not s.enabled:
        return s
    key = "kubernetes.api_server"
    url = s.api_server.rstrip("/")
    if not url:
        host = rd.env.expand("${KUBERNETES_SERVICE_HOST}", key)
        port = rd.env.expand("${KUBERNETES_SERVICE_PORT}", key)
        if not host or not port:
            rd.error(
                key,
                f"is empty and this is not a pod ({rd.env.empty_variables(key)}): set"
                ' api_server = "https://HOST:PORT", or run sebridge in the cluster',
            )
            return s
        url = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    elif not url.startswith("https://"):
        rd.error(key, f"must start with https:// (the token is sent to it), got {url[:60]!r}")
        return s
    return replace(s, api_server=url)
