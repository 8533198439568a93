"""deploy/kubernetes renders with `kubectl kustomize`, and every object is valid Kubernetes.

Each object is validated against the Kubernetes schemas (kubernetes-validate, offline,
strict: an unknown field is an error); then what the README promises is checked on the
rendered objects: host networking, the probes' paths on the port the config listens on,
RBAC verbs no wider than the drain and uncordon hooks need, the config's store from the
Secret and no vm_name (learnt from IMDS).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from sebridge.integrations.registry import load_config

ROOT = Path(__file__).resolve().parent.parent
KUSTOMIZE_DIR = ROOT / "deploy" / "kubernetes"
# The DaemonSet's image: deploy/kubernetes/Containerfile on top of deploy/container's.
CONTAINERFILES = (ROOT / "deploy" / "container" / "Containerfile", KUSTOMIZE_DIR / "Containerfile")
# A version AKS supports and kubernetes-validate ships schemas of.
KUBERNETES_VERSION = "1.32.0"
# What `kubectl drain` and `kubectl uncordon` call, per (API group, resource).
NEEDED = {
    ("", "nodes"): {"get", "patch"},
    ("", "pods"): {"get", "list"},
    ("", "pods/eviction"): {"create"},
    ("apps", "daemonsets"): {"get"},
}


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: it renders deploy/kubernetes (kustomize)")
    rendered = subprocess.run(
        [kubectl, "kustomize", str(KUSTOMIZE_DIR)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


def config_of(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return tomllib.loads(one(objects, "ConfigMap")["data"]["sebridge.toml"])


def test_every_object_is_valid_kubernetes(objects: list[dict[str, Any]]) -> None:
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == [
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "DaemonSet",
        "Namespace",
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
    assert container["envFrom"] == [{"secretRef": {"name": "sebridge"}}]


def test_the_probes_ask_healthz_and_readyz_where_the_config_listens(
    objects: list[dict[str, Any]],
) -> None:
    (container,) = one(objects, "DaemonSet")["spec"]["template"]["spec"]["containers"]
    host, _, port = config_of(objects)["http"]["listen"].rpartition(":")
    assert host == "${POD_IP}"  # the node's address: where the kubelet probes a host pod
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": int(port)}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": int(port)}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["config"] == "/etc/sebridge"
    assert container["args"] == ["run", "--config", "/etc/sebridge/sebridge.toml"]


def test_liveness_outlasts_a_database_outage_of_ten_minutes(
    objects: list[dict[str, Any]],
) -> None:
    """/healthz is 503 while the store cannot be written; a restart would not bring the
    database back and would lose the documents the agent keeps meanwhile. Liveness
    restarts only after 10 minutes of failures; readiness reacts within seconds."""
    (container,) = one(objects, "DaemonSet")["spec"]["template"]["spec"]["containers"]
    live, ready = container["livenessProbe"], container["readinessProbe"]
    window = live["periodSeconds"] * live["failureThreshold"]
    assert window >= 600
    assert live["timeoutSeconds"] < live["periodSeconds"]
    assert ready["periodSeconds"] * ready.get("failureThreshold", 3) <= 60


def test_rbac_allows_what_drain_and_uncordon_need_and_nothing_more(
    objects: list[dict[str, Any]],
) -> None:
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in one(objects, "ClusterRole")["rules"]:
        assert "resourceNames" not in rule and "nonResourceURLs" not in rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    assert granted == NEEDED
    binding = one(objects, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == one(objects, "ClusterRole")["metadata"]["name"]
    sa = one(objects, "ServiceAccount")["metadata"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["name"], "namespace": sa["namespace"]}
    ]
    assert not [o for o in objects if o["kind"] in ("Role", "RoleBinding")]


def test_the_config_is_a_fleet_with_drain_and_uncordon_hooks(
    objects: list[dict[str, Any]],
) -> None:
    config = config_of(objects)
    assert config["store"]["url"] == "${SEBRIDGE_STORE_URL}"  # PostgreSQL, from the Secret
    assert "vm_name" not in config.get("imds", {})  # learnt from IMDS, not the node name
    (rule,) = config["policy"]["rules"]
    assert rule["this_vm"] is True
    assert rule["prepare"] == ["drain"] and rule["recover"] == ["uncordon"]
    drain, uncordon = config["hooks"]["drain"], config["hooks"]["uncordon"]
    assert drain["command"][:3] == ["/usr/local/bin/kubectl", "drain", "${NODE_NAME}"]
    assert "--ignore-daemonsets" in drain["command"]
    (timeout,) = [a for a in drain["command"] if a.startswith("--timeout=")]
    assert int(timeout.removeprefix("--timeout=").removesuffix("s")) < drain["timeout"]
    assert uncordon["command"] == ["/usr/local/bin/kubectl", "uncordon", "${NODE_NAME}"]


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


def test_the_readmes_kubernetes_hooks_are_the_configmaps(objects: list[dict[str, Any]]) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("## Readiness hooks and reminders")
    section = readme[start : readme.index("\n## ", start + 1)]
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
    environ = {
        "SEBRIDGE_STORE_URL": "postgresql://sebridge@db.example.net/sebridge?sslmode=require",
        "SLACK_BOT_TOKEN": "xoxb-1-2-3",
        "SLACK_APP_TOKEN": "xapp-1-2-3",
        "NODE_NAME": "aks-nodepool1-12345678-vmss000003",
        "POD_IP": "10.224.0.4",
    }
    config = load_config(path, environ=environ)
    assert config.store.url.startswith("postgresql://")
    assert (config.http.listen_host, config.http.listen_port) == ("10.224.0.4", 8787)
    assert config.imds.vm_name == ""  # learnt from IMDS
    assert config.hooks["drain"].command[1:3] == ("drain", "aks-nodepool1-12345678-vmss000003")
    assert config.hooks["uncordon"].command[1:] == ("uncordon", "aks-nodepool1-12345678-vmss000003")
