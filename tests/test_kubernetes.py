"""deploy/kubernetes renders with `kubectl kustomize`, and every object is valid Kubernetes.

Each object is validated against the Kubernetes schemas (kubernetes-validate, offline,
strict: an unknown field is an error); then what the docs promise (docs/operations/aks.md) is checked on the
rendered objects: host networking on Linux nodes only, a critical priority, the
namespace's Pod Security level, the probes' paths on the port the config listens on,
RBAC verbs no wider than the hooks and the Kubernetes sink need (and the fake API
server of tests/fakes/kubernetes.py reads that RBAC as kustomize renders it), secrets
as the Secret's files (never environment variables), rules that drain on every
disruptive event type, the PodMonitor component, and no vm_name (learnt from IMDS).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from fakes.kubernetes import FakeKubernetes, shipped_rbac
from pages import page
from sebridge.integrations.kubernetes.doctor import NEEDED as SINK_CALLS
from sebridge.integrations.registry import load_config

ROOT = Path(__file__).resolve().parent.parent
KUSTOMIZE_DIR = ROOT / "deploy" / "kubernetes"
# The DaemonSet's image: deploy/kubernetes/Containerfile on top of deploy/container's.
CONTAINERFILES = (ROOT / "deploy" / "container" / "Containerfile", KUSTOMIZE_DIR / "Containerfile")
# A version AKS supports and kubernetes-validate ships schemas of.
KUBERNETES_VERSION = "1.32.0"
# Cluster-wide, per (API group, resource): what `kubectl drain` and `kubectl uncordon`
# call, and the Kubernetes sink's nodes (list, get) and nodes/status (patch).
NEEDED = {
    ("", "nodes"): {"get", "list", "patch"},
    ("", "nodes/status"): {"patch"},
    ("", "pods"): {"get", "list"},
    ("", "pods/eviction"): {"create"},
    ("apps", "daemonsets"): {"get"},
}
# In the namespace "default" only: the sink's Events about Nodes.
NEEDED_IN_DEFAULT = {("", "events"): {"create"}}
SECRETS = "/run/secrets/sebridge"
DISRUPTIVE = ("Reboot", "Redeploy", "Preempt", "Terminate")


def kustomize(folder: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: it renders deploy/kubernetes (kustomize)")
    rendered = subprocess.run(
        [kubectl, "kustomize", str(folder)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return kustomize(KUSTOMIZE_DIR)


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


def config_of(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return tomllib.loads(one(objects, "ConfigMap")["data"]["sebridge.toml"])


def test_every_object_is_valid_kubernetes(objects: list[dict[str, Any]]) -> None:
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == [
        "ClusterRole",
        "ClusterRole",
        "ClusterRoleBinding",
        "ClusterRoleBinding",
        "ConfigMap",
        "DaemonSet",
        "Namespace",
        "Role",
        "RoleBinding",
        "ServiceAccount",
    ]
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_an_invalid_object_is_refused() -> None:
    """The validation has teeth: a probe with a misspelt field fails it."""
    bad = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "x"},
        "spec": {
            "containers": [{"name": "x", "image": "x", "livenessProbe": {"httpGet": {"pth": "/"}}}]
        },
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, KUBERNETES_VERSION, strict=True)


def test_the_agent_runs_on_the_host_network_as_its_own_service_account(
    objects: list[dict[str, Any]],
) -> None:
    pod = one(objects, "DaemonSet")["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True  # AKS lets only the node's network reach IMDS
    assert pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert pod["serviceAccountName"] == one(objects, "ServiceAccount")["metadata"]["name"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    env = {e["name"]: e.get("valueFrom", {}) for e in container["env"]}
    assert env["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env["POD_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}


def test_it_runs_on_linux_nodes_only_at_a_critical_priority(
    objects: list[dict[str, Any]],
) -> None:
    """It tolerates every taint (every node gets maintenance events), so without a node
    selector it would land on Windows nodes; evicted under node pressure it would be gone
    when maintenance is due."""
    pod = one(objects, "DaemonSet")["spec"]["template"]["spec"]
    assert pod["tolerations"] == [{"operator": "Exists"}]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["priorityClassName"] == "system-node-critical"


def test_the_namespace_admits_host_networking_and_nothing_else_runs_there(
    objects: list[dict[str, Any]],
) -> None:
    """baseline refuses host networking (and host ports): privileged is the narrowest
    Pod Security level that admits the agent; every namespaced object is in it, but the
    events Role and binding, which must be in default."""
    namespace = one(objects, "Namespace")
    labels = namespace["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    assert labels["pod-security.kubernetes.io/enforce-version"] == "latest"
    for obj in objects:
        if obj["kind"] in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
            assert "namespace" not in obj["metadata"]
        elif obj["kind"] in ("Role", "RoleBinding"):
            assert obj["metadata"]["namespace"] == "default"
        else:
            assert obj["metadata"]["namespace"] == namespace["metadata"]["name"], obj["kind"]


def test_secrets_are_the_secrets_files_never_environment_variables(
    objects: list[dict[str, Any]],
) -> None:
    pod = one(objects, "DaemonSet")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "envFrom" not in container
    assert not [e for e in container["env"] if "secretKeyRef" in e.get("valueFrom", {})]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["secrets"]["secret"] == {"secretName": "sebridge", "defaultMode": 0o440}
    assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsGroup"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["secrets"] == {"name": "secrets", "mountPath": SECRETS, "readOnly": True}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["PGSERVICEFILE"] == f"{SECRETS}/pg_service.conf"
    config = config_of(objects)
    assert config["store"]["url"] == "postgresql://?service=sebridge"
    assert config["slack"]["bot_token_file"] == f"{SECRETS}/slack-bot-token"
    assert config["slack"]["app_token_file"] == f"{SECRETS}/slack-app-token"
    assert "${" not in one(objects, "ConfigMap")["data"]["sebridge.toml"].replace(
        "${NODE_NAME}", ""
    ).replace("${POD_IP}", "")


def test_prometheus_finds_the_pods_by_annotation_or_by_the_podmonitor(
    objects: list[dict[str, Any]], tmp_path: Path
) -> None:
    """The plain annotations in the base; the PodMonitor (a CRD that may be absent) only
    from its component, where it selects the agents' pods on their named port."""
    template = one(objects, "DaemonSet")["spec"]["template"]
    (container,) = template["spec"]["containers"]
    port = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert template["metadata"]["annotations"] == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(port["http"]),
        "prometheus.io/path": "/metrics",
    }
    assert not [o for o in objects if o["kind"] == "PodMonitor"]
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [os.path.relpath(KUSTOMIZE_DIR, overlay)],
                "components": [
                    os.path.relpath(KUSTOMIZE_DIR / "components" / "podmonitor", overlay)
                ],
            }
        )
    )
    rendered = kustomize(overlay)
    monitor = one(rendered, "PodMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["namespace"] == one(rendered, "DaemonSet")["metadata"]["namespace"]
    labels = one(rendered, "DaemonSet")["spec"]["template"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("http", "/metrics")
    assert sorted(o["kind"] for o in rendered if o["kind"] != "PodMonitor") == sorted(
        o["kind"] for o in objects
    )


def test_the_probes_ask_livez_and_readyz_where_the_config_listens_for_probes(
    objects: list[dict[str, Any]],
) -> None:
    (container,) = one(objects, "DaemonSet")["spec"]["template"]["spec"]["containers"]
    http = config_of(objects)["http"]
    host, _, port = http["probe_listen"].rpartition(":")
    assert host == "${POD_IP}"  # the node's address: where the kubelet probes a host pod
    assert port != http["listen"].rpartition(":")[2]  # a port of their own
    assert container["livenessProbe"]["httpGet"] == {"path": "/livez", "port": int(port)}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": int(port)}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": 8787, "probes": int(port)}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["config"] == "/etc/sebridge"
    assert container["args"] == ["run", "--config", "/etc/sebridge/sebridge.toml"]


def test_liveness_restarts_a_stopped_agent_and_readiness_reacts_within_a_minute(
    objects: list[dict[str, Any]],
) -> None:
    """/livez stays 200 through a database or IMDS outage (tests/test_probe_listener.py),
    so liveness needs no long window to outlast one; each probe answers within its
    timeout, and readiness marks the pod unready within a minute."""
    (container,) = one(objects, "DaemonSet")["spec"]["template"]["spec"]["containers"]
    live, ready = container["livenessProbe"], container["readinessProbe"]
    assert live["periodSeconds"] * live["failureThreshold"] <= 120
    assert live["timeoutSeconds"] < live["periodSeconds"]
    assert ready["periodSeconds"] * ready.get("failureThreshold", 3) <= 60


def test_rbac_allows_what_the_hooks_and_the_sink_need_and_nothing_more(
    objects: list[dict[str, Any]],
) -> None:
    """Cluster-wide only what cannot be narrowed (nodes are cluster-scoped and no RBAC
    rule names "the pod's own node"; drained pods are in every namespace); the Events in
    default only. No resourceNames: the nodes are not known when this is written."""
    sa = one(objects, "ServiceAccount")["metadata"]
    subject = {"kind": "ServiceAccount", "name": sa["name"], "namespace": sa["namespace"]}
    roles = {
        (o["kind"], o["metadata"]["name"]): o
        for o in objects
        if o["kind"] in ("Role", "ClusterRole")
    }
    granted: dict[str, dict[tuple[str, str], set[str]]] = {}
    for binding in [o for o in objects if o["kind"].endswith("Binding")]:
        assert binding["subjects"] == [subject]
        ref = binding["roleRef"]
        where = binding["metadata"].get("namespace", "*")
        for rule in roles[(ref["kind"], ref["name"])]["rules"]:
            assert "resourceNames" not in rule and "nonResourceURLs" not in rule
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    granted.setdefault(where, {}).setdefault((group, resource), set()).update(
                        rule["verbs"]
                    )
    assert granted == {"*": NEEDED, "default": NEEDED_IN_DEFAULT}
    bound = {(b["roleRef"]["kind"], b["roleRef"]["name"]) for b in objects if "roleRef" in b}
    assert bound == set(roles)  # no role left unbound


def test_the_fake_api_server_reads_the_rbac_as_kustomize_renders_it(
    objects: list[dict[str, Any]],
) -> None:
    """tests/fakes/kubernetes.py parses rbac.yaml itself (the contract runs without
    kubectl): its reading grants exactly what the rendered objects grant, and every call
    the sink makes (and `sebridge check` asks about) is among them."""
    user, rules = shipped_rbac()
    sa = one(objects, "ServiceAccount")["metadata"]
    assert user == f"system:serviceaccount:{sa['namespace']}:{sa['name']}"
    flat: dict[str, dict[tuple[str, str], set[str]]] = {}
    for where, rule in rules:
        for group in rule.groups:
            for resource in rule.resources:
                flat.setdefault(where or "*", {}).setdefault((group, resource), set()).update(
                    rule.verbs
                )
    assert flat == {"*": NEEDED, "default": NEEDED_IN_DEFAULT}
    with FakeKubernetes() as fake:
        for verb, group, resource, sub, namespace in SINK_CALLS:
            full = f"{resource}/{sub}" if sub else resource
            assert fake.allowed(verb, group, full, namespace, "aks-nodepool1-vmss000000")
        assert not fake.allowed("create", "", "events", "sebridge", "")
        assert not fake.allowed("delete", "", "nodes", "", "aks-nodepool1-vmss000000")
        assert not fake.allowed("get", "", "secrets", "sebridge", "sebridge")


def test_the_config_is_a_fleet_with_drain_and_uncordon_hooks(
    objects: list[dict[str, Any]],
) -> None:
    config = config_of(objects)
    assert config["store"]["url"].startswith("postgresql://")  # a fleet on PostgreSQL
    assert "vm_name" not in config.get("imds", {})  # learnt from IMDS, not the node name
    rules = config["policy"]["rules"]
    (reboot,) = [r for r in rules if "Reboot" in r["event_types"]]
    assert reboot["this_vm"] is True
    assert reboot["prepare"] == ["drain"] and reboot["recover"] == ["uncordon"]
    drain, uncordon = config["hooks"]["drain"], config["hooks"]["uncordon"]
    assert drain["command"][:3] == ["/usr/local/bin/kubectl", "drain", "${NODE_NAME}"]
    assert "--ignore-daemonsets" in drain["command"]
    (timeout,) = [a for a in drain["command"] if a.startswith("--timeout=")]
    assert int(timeout.removeprefix("--timeout=").removesuffix("s")) < drain["timeout"]
    assert uncordon["command"] == ["/usr/local/bin/kubectl", "uncordon", "${NODE_NAME}"]


def test_every_disruptive_event_drains_the_node_within_its_notice(
    objects: list[dict[str, Any]],
) -> None:
    """Reboot, Redeploy, Preempt and Terminate each meet a rule that drains first (a
    kubectl drain hook); Preempt's comes 30 s ahead, so its drain and hook end within
    them. A Freeze (a pause of seconds) is announced, not drained."""
    config = config_of(objects)
    hooks = config["hooks"]
    for event_type in DISRUPTIVE:
        (rule,) = [r for r in config["policy"]["rules"] if event_type in r["event_types"]]
        assert rule["action"] in ("ask", "approve"), event_type
        (hook,) = rule["prepare"]
        assert hooks[hook]["command"][1:3] == ["drain", "${NODE_NAME}"], event_type
    (preempt,) = [r for r in config["policy"]["rules"] if "Preempt" in r["event_types"]]
    quick = hooks[preempt["prepare"][0]]
    (timeout,) = [a for a in quick["command"] if a.startswith("--timeout=")]
    assert int(timeout.removeprefix("--timeout=").removesuffix("s")) < quick["timeout"] < 30
    (freeze,) = [r for r in config["policy"]["rules"] if "Freeze" in r["event_types"]]
    assert freeze["action"] == "inform" and not freeze.get("prepare")
    assert config["kubernetes"] == {"enabled": True}


def installed_by_the_containerfiles() -> set[str]:
    """The paths the images' COPY lines put files at."""
    installed: set[str] = set()
    for containerfile in CONTAINERFILES:
        for line in containerfile.read_text(encoding="utf-8").splitlines():
            words = line.split()
            if words[:1] != ["COPY"]:
                continue
            *sources, dest = [w for w in words[1:] if not w.startswith("--")]
            for source in sources:
                installed.add(dest + Path(source).name if dest.endswith("/") else dest)
    return installed


def test_every_hook_runs_a_program_the_image_has(objects: list[dict[str, Any]]) -> None:
    """In the pod /etc/sebridge is the ConfigMap: a hook must name a file the image holds."""
    installed = installed_by_the_containerfiles()
    assert "/usr/local/bin/kubectl" in installed
    hooks = config_of(objects)["hooks"]
    assert hooks
    for name, hook in hooks.items():
        assert hook["command"][0] in installed, f"hooks.{name}: {hook['command'][0]}"


def test_the_hooks_pages_kubernetes_hooks_are_the_configmaps(objects: list[dict[str, Any]]) -> None:
    section = page("hooks.md")
    (example,) = [t for t in re.findall(r"```toml\n(.*?)```", section, re.S) if "kubectl" in t]
    assert tomllib.loads(example)["hooks"] == config_of(objects)["hooks"]


def test_sebridge_accepts_the_config_as_the_pod_sees_it(
    objects: list[dict[str, Any]], tmp_path: Path
) -> None:
    """The ConfigMap's file, loaded by sebridge's own loader with the environment the pod
    gives it; kubectl is where the image puts it (here: a stand-in at a temporary path)."""
    kubectl = tmp_path / "kubectl"
    kubectl.write_text("#!/bin/sh\n")
    kubectl.chmod(0o755)
    text = one(objects, "ConfigMap")["data"]["sebridge.toml"]
    path = tmp_path / "sebridge.toml"
    path.write_text(text.replace("/usr/local/bin/kubectl", str(kubectl)))
    secrets = tmp_path / "secrets"  # the Secret's files, where the pod has them
    secrets.mkdir()
    (secrets / "slack-bot-token").write_text("xoxb-1-2-3\n")
    (secrets / "slack-app-token").write_text("xapp-1-2-3\n")
    environ = {
        "NODE_NAME": "aks-nodepool1-12345678-vmss000003",
        "POD_IP": "10.224.0.4",
        "KUBERNETES_SERVICE_HOST": "10.0.0.1",  # the kubelet sets these in every container
        "KUBERNETES_SERVICE_PORT": "443",
    }

    def locate(file: str) -> str:
        assert file.startswith(SECRETS + "/")
        return str(secrets / file.removeprefix(SECRETS + "/"))

    config = load_config(path, environ=environ, locate=locate)
    assert config.store.url == "postgresql://?service=sebridge"
    assert config.sections["slack"].bot_token.reveal() == "xoxb-1-2-3"
    kubernetes = config.sections["kubernetes"]
    assert kubernetes.enabled and kubernetes.api_server == "https://10.0.0.1:443"
    assert (config.http.listen_host, config.http.listen_port) == ("10.224.0.4", 8787)
    assert (config.http.probe_host, config.http.probe_port) == ("10.224.0.4", 8788)
    assert config.imds.vm_name == ""  # learnt from IMDS
    assert config.hooks["drain"].command[1:3] == ("drain", "aks-nodepool1-12345678-vmss000003")
    assert config.hooks["uncordon"].command[1:] == ("uncordon", "aks-nodepool1-12345678-vmss000003")
