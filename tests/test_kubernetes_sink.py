"""The Kubernetes integration against a fake API server over HTTPS (tests/fakes/kubernetes.py).

The fake checks the bearer token and grants only what deploy/kubernetes/rbac.yaml
grants (so every test also says the sink stays within the shipped RBAC: `refused` stays
empty). What is checked is what the cluster ends up holding: the Events about each node
and the node condition ScheduledMaintenance, through the daemon (`sebridge once`, on
SQLite and PostgreSQL) and through the sink itself for the cases a daemon cannot
arrange (a retry after a lost answer, a node changed under the patch, a refusal).
"""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import certifi
import pytest

from fakes.kubernetes import FakeKubernetes, Rule
from helpers import cli_main, toml_str, write_config
from pages import page
from sebridge.imds.simulator import Simulator
from sebridge.integrations.base import TrialNote
from sebridge.integrations.kubernetes import Kubernetes
from sebridge.integrations.kubernetes.client import KubeApi
from sebridge.integrations.kubernetes.doctor import check_kubernetes
from sebridge.integrations.kubernetes.events import event_body
from sebridge.integrations.kubernetes.nodes import Node
from sebridge.integrations.kubernetes.sink import CONFLICT_TRIES, KubernetesSink
from sebridge.integrations.kubernetes.trial import send_trial
from sebridge.integrations.registry import config_from_mapping
from sebridge.kernel.errors import ConfigError, PermanentDeliveryError, RetryableDeliveryError
from sebridge.model import HookRun, ScheduledEvent, Transition, TransitionKind
from sebridge.model.approval import ApprovalState
from sebridge.model.message import Message

SET = "aks-nodepool1-12345678-vmss"
SCALE_SET = (
    "azure:///subscriptions/0000/resourceGroups/mc_rg_aks_westeurope/providers/"
    f"Microsoft.Compute/virtualMachineScaleSets/{SET}/virtualMachines/"
)
NOW = datetime(2026, 11, 27, 13, 0, tzinfo=UTC)


@pytest.fixture
def fake() -> Iterator[FakeKubernetes]:
    with FakeKubernetes() as api:
        # Scale-set instances 3 and 36: their nodes end in base 36 (000003, 00000a).
        api.add_node(f"{SET}000003", SCALE_SET + "3")
        api.add_node(f"{SET}00000a", SCALE_SET + "10")
        yield api
    assert not api.refused  # nothing the shipped RBAC does not grant was asked for


def api_of(fake: FakeKubernetes, **changes: Any) -> KubeApi:
    given = {
        "server": fake.server,
        "token_file": str(fake.token_file),
        "ca_file": str(fake.ca_file),
        "timeout": 5.0,
    }
    return KubeApi(**{**given, **changes})


def message(
    kind: str = TransitionKind.SCHEDULED,
    *,
    event_id: str = "6CB0F9E2-1D6C-4B4E-9C63-2A1F2E1B0C01",
    event_type: str = "Reboot",
    resources: tuple[str, ...] = (f"{SET}_3",),
    transition_id: int = 7,
    approval: str | None = None,
    hook: HookRun | None = None,
    attempt: int = 0,
) -> Message:
    event = ScheduledEvent(
        event_id,
        event_type,
        "Scheduled",
        resources,
        not_before=NOW + timedelta(minutes=15),
        description="Host maintenance",
        source="Platform",
    )
    t = Transition(kind, event, NOW, actor="alice" if kind == "approved" else None, hook=hook)
    return Message(
        t,
        f"{SET}_3",
        "ask",
        transition_id=transition_id,
        approval_state=approval,
        attempt=attempt,
    )


def scheduled_maintenance(fake: FakeKubernetes, node: str) -> dict[str, Any] | None:
    return fake.condition(node, "ScheduledMaintenance")


# -- what the cluster holds ------------------------------------------------------------------


def test_an_event_becomes_an_event_on_its_node_and_the_condition_while_it_is_open(
    fake: FakeKubernetes,
) -> None:
    sink = KubernetesSink(api_of(fake), clock=lambda: NOW)
    sink.send(message())
    ((namespace, name), event), *others = fake.events.items()
    assert not others
    assert namespace == "default"  # the only namespace that takes Events about a Node
    node = fake.nodes[f"{SET}000003"]
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Node",
        "name": node["metadata"]["name"],
        "uid": node["metadata"]["uid"],
    }
    assert name.startswith(f"{SET}000003.sebridge-7-")
    assert (event["reason"], event["type"]) == ("VMEventScheduled", "Normal")  # AKS's own
    assert event["message"].startswith(
        "Reboot 6CB0F9E2-1D6C-4B4E-9C63-2A1F2E1B0C01: scheduled; NotBefore 2026-11-27T13:15:00Z"
    )
    condition = scheduled_maintenance(fake, f"{SET}000003")
    assert condition == {
        "type": "ScheduledMaintenance",
        "status": "True",
        "reason": "RebootScheduled",
        "message": "Reboot 6CB0F9E2-1D6C-4B4E-9C63-2A1F2E1B0C01 Scheduled"
        " NotBefore=2026-11-27T13:15:00Z",
        "lastHeartbeatTime": "2026-11-27T13:00:00Z",
        "lastTransitionTime": "2026-11-27T13:00:00Z",
    }
    assert scheduled_maintenance(fake, f"{SET}00000a") is None  # not listed: untouched
    ready = fake.condition(f"{SET}000003", "Ready")
    assert ready is not None and ready["status"] == "True"  # the kubelet's, kept

    sink.send(message(TransitionKind.APPROVED, transition_id=8, approval=ApprovalState.POSTED))
    condition = scheduled_maintenance(fake, f"{SET}000003")
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("True", "RebootApproved")
    sink.send(message(TransitionKind.COMPLETED, transition_id=9))
    condition = scheduled_maintenance(fake, f"{SET}000003")
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", "NoMaintenanceScheduled")
    reasons = sorted(e["reason"] for e in fake.events.values())
    assert reasons == ["RebootApproved", "RebootCompleted", "VMEventScheduled"]


def test_the_condition_stays_true_while_another_event_is_open(fake: FakeKubernetes) -> None:
    """Two events on one node: the first one's end leaves the second one listed."""
    sink = KubernetesSink(api_of(fake), clock=lambda: NOW)
    sink.send(message())
    sink.send(message(event_id="FREEZE-1", event_type="Freeze", transition_id=8))
    sink.send(message(TransitionKind.COMPLETED, transition_id=9))
    condition = scheduled_maintenance(fake, f"{SET}000003")
    assert condition is not None
    assert condition["status"] == "True"
    assert condition["message"] == "Freeze FREEZE-1 Scheduled NotBefore=2026-11-27T13:15:00Z"
    assert condition["lastTransitionTime"] == "2026-11-27T13:00:00Z"  # True all along


def test_every_listed_node_hears_of_the_event_and_a_hook_only_its_own_node(
    fake: FakeKubernetes,
) -> None:
    """In a fleet any agent delivers any transition: the node comes from the VM's name
    (providerID), not from the agent. A VM that is no node gets nothing."""
    sink = KubernetesSink(api_of(fake))
    sink.send(message(resources=(f"{SET}_3", f"{SET}_10", "a-plain-vm")))
    nodes = sorted(e["involvedObject"]["name"] for e in fake.events.values())
    assert nodes == [f"{SET}000003", f"{SET}00000a"]
    hook = HookRun("drain", "prepare", f"{SET}_10", exit_code=1)
    sink.send(message(TransitionKind.HOOK_FAILED, transition_id=8, hook=hook))
    (failed,) = [e for e in fake.events.values() if e["reason"] == "RebootHookFailed"]
    assert failed["involvedObject"]["name"] == f"{SET}00000a"
    assert failed["type"] == "Warning"
    assert "hook drain (prepare)" in failed["message"]


def test_a_node_deleted_with_its_vm_still_hears_the_end(fake: FakeKubernetes) -> None:
    """A Terminate deletes the VM, and its node goes: the completed transition is still
    an Event about it, and no condition is left to keep."""
    sink = KubernetesSink(api_of(fake))
    sink.send(message(event_type="Terminate"))
    del fake.nodes[f"{SET}000003"]
    sink.send(message(TransitionKind.COMPLETED, event_type="Terminate", transition_id=8))
    reasons = sorted(e["reason"] for e in fake.events.values())
    assert reasons == ["TerminateCompleted", "VMEventScheduled"]


def test_a_retry_after_a_lost_answer_creates_nothing_new(fake: FakeKubernetes) -> None:
    sink = KubernetesSink(api_of(fake))
    sink.send(message())
    before = dict(fake.events), scheduled_maintenance(fake, f"{SET}000003")
    patches = len([r for r in fake.requests if r.verb == "patch"])
    KubernetesSink(api_of(fake)).send(message(attempt=1))  # another agent, same transition
    assert (dict(fake.events), scheduled_maintenance(fake, f"{SET}000003")) == before
    assert len([r for r in fake.requests if r.verb == "patch"]) == patches  # nothing to change
    answers = [r for r in fake.requests if r.verb == "create"]
    assert len(answers) == 2  # the second answered 409 AlreadyExists: a delivery


def test_a_node_changed_under_the_patch_is_read_and_patched_again(fake: FakeKubernetes) -> None:
    sink = KubernetesSink(api_of(fake))
    fake.stale_patches = CONFLICT_TRIES - 1
    sink.send(message())
    condition = scheduled_maintenance(fake, f"{SET}000003")
    assert condition is not None and condition["status"] == "True"
    fake.stale_patches = CONFLICT_TRIES
    with pytest.raises(RetryableDeliveryError, match="changed under 3 patches"):
        sink.send(message(event_id="OTHER", transition_id=8))
    assert "OTHER" not in (scheduled_maintenance(fake, f"{SET}000003") or {})["message"]


# -- refusals --------------------------------------------------------------------------------


def test_a_wrong_token_is_refused_and_never_shown(
    fake: FakeKubernetes, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = tmp_path / "token"
    wrong.write_text("eyJ-not-the-token-of-this-account\n")
    with pytest.raises(PermanentDeliveryError) as caught:
        KubernetesSink(api_of(fake, token_file=str(wrong))).send(message())
    assert "token was refused (HTTP 401)" in str(caught.value)
    assert "eyJ-not" not in str(caught.value) + caplog.text
    assert fake.events == {}


def test_an_api_server_whose_certificate_the_ca_did_not_sign_is_not_trusted(
    fake: FakeKubernetes,
) -> None:
    with pytest.raises(RetryableDeliveryError, match="certificate is not signed by"):
        KubernetesSink(api_of(fake, ca_file=certifi.where())).send(message())
    assert fake.requests == []  # the token never left


def test_a_missing_token_or_ca_file_is_said_and_retried(
    fake: FakeKubernetes, tmp_path: Path
) -> None:
    """The kubelet mounts both; until it has (or after a bad mount), nothing is sent."""
    missing = str(tmp_path / "absent")
    with pytest.raises(RetryableDeliveryError, match=f"cannot read the token {missing}"):
        KubernetesSink(api_of(fake, token_file=missing)).send(message())
    with pytest.raises(RetryableDeliveryError, match=f"the CA file {missing} .* is missing"):
        KubernetesSink(api_of(fake, ca_file=missing)).send(message())
    assert fake.requests == []


def test_what_the_rbac_does_not_grant_is_refused_for_good(fake: FakeKubernetes) -> None:
    """The fake refuses as the cluster would if nodes/status were not granted; the error
    says what to apply. (The fixture's check that nothing was refused is skipped here.)"""
    fake.rules = [(w, r) for w, r in fake.rules if "nodes/status" not in r.resources]
    with pytest.raises(PermanentDeliveryError, match=r"may not patch node .*rbac.yaml"):
        KubernetesSink(api_of(fake)).send(message())
    assert fake.refused == [f"patch nodes/status /{SET}000003"]
    fake.refused.clear()


# -- check and --send-test -------------------------------------------------------------------


def test_check_says_the_api_answers_and_names_a_missing_permission(fake: FakeKubernetes) -> None:
    (ok,) = check_kubernetes(api_of(fake))
    assert ok.ok and "may list and get nodes, patch their status and create Events" in ok.message
    fake.rules = [
        *[(w, r) for w, r in fake.rules if w != "default"],
        ("sebridge", Rule(("",), ("events",), ("create",))),  # the wrong namespace
    ]
    (missing,) = check_kubernetes(api_of(fake))
    assert not missing.ok
    assert missing.message.startswith("the service account may not create events in default")


def test_send_test_posts_one_event_on_this_vms_node(fake: FakeKubernetes) -> None:
    found = send_trial(api_of(fake), TrialNote("sebridge test message", f"{SET}_10"))
    assert found.ok, found.message
    ((_, event),) = fake.events.items()
    assert (event["reason"], event["involvedObject"]["name"]) == ("SebridgeTest", f"{SET}00000a")
    assert scheduled_maintenance(fake, f"{SET}00000a") is None  # a test is no open event
    nowhere = send_trial(api_of(fake), TrialNote("sebridge test message", "vm-elsewhere"))
    assert not nowhere.ok and "no node of the cluster" in nowhere.message


# -- configuration and loading ---------------------------------------------------------------


def test_in_a_pod_the_api_server_is_the_kubelets_address_else_it_must_be_given() -> None:
    environ = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    config = config_from_mapping({"kubernetes": {"enabled": True}}, environ=environ)
    assert config.sections["kubernetes"].api_server == "https://[fd00::1]:443"
    with pytest.raises(
        ConfigError, match=r"kubernetes\.api_server: is empty and this is not a pod"
    ):
        config_from_mapping({"kubernetes": {"enabled": True}}, environ={})
    with pytest.raises(ConfigError, match="must start with https://"):
        config_from_mapping(
            {"kubernetes": {"enabled": True, "api_server": "http://10.0.0.1"}}, environ={}
        )
    off = config_from_mapping({"kubernetes": {"enabled": False}}, environ={})
    assert not Kubernetes().enabled(off.sections["kubernetes"], True)


def test_an_agent_without_kubernetes_loads_none_of_its_client() -> None:
    """The VM agent's memory and start: the registry imports the integration's settings,
    never its client (nor requests)."""
    code = (
        "import sys, sebridge.integrations.registry as r;"
        "r.config_from_mapping({'console': {'enabled': True}}, environ={});"
        "print(sorted(m for m in sys.modules"
        " if m.startswith('sebridge.integrations.kubernetes.') or m == 'requests'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.strip() == "['sebridge.integrations.kubernetes.settings']"


# -- through the daemon ----------------------------------------------------------------------


@pytest.mark.usefixtures("cli_in_process")
def test_the_daemon_posts_each_transition_and_clears_the_condition_when_the_event_ends(
    fake: FakeKubernetes, sim: Simulator, tmp_path: Path, store_url: str
) -> None:
    """`sebridge once` twice, with the event, then without it: on SQLite and PostgreSQL."""
    vm = sim.vm_name
    fake.add_node("aks-agent-node", f"azure:///subscriptions/0/resourceGroups/r/providers/"
                  f"Microsoft.Compute/virtualMachines/{vm}")  # fmt: skip
    section = (
        "[kubernetes]\nenabled = true\n"
        f"api_server = {toml_str(fake.server)}\n"
        f"token_file = {toml_str(str(fake.token_file))}\n"
        f"ca_file = {toml_str(str(fake.ca_file))}\n"
    )
    config = write_config(
        tmp_path / "sebridge.toml", endpoint=sim.url, store_url=store_url, extra=section
    )
    event_id = sim.schedule("Preempt")
    code, _, err = cli_main("once", "--config", str(config))
    assert code == 0, err
    condition = scheduled_maintenance(fake, "aks-agent-node")
    assert condition is not None and condition["status"] == "True"
    assert condition["message"].startswith(f"Preempt {event_id} ")
    sim.complete(event_id)
    code, _, err = cli_main("once", "--config", str(config))
    assert code == 0, err
    condition = scheduled_maintenance(fake, "aks-agent-node")
    assert condition is not None and condition["status"] == "False"
    reasons = [e["reason"] for e in fake.events.values()]
    assert reasons[0] == "VMEventScheduled" and reasons[-1] in (
        "PreemptCompleted",
        "PreemptCancelled",
    )
    assert {e["involvedObject"]["name"] for e in fake.events.values()} == {"aks-agent-node"}


def test_a_message_already_shown_keeps_its_event_name(fake: FakeKubernetes) -> None:
    """The name comes from the stored transition, the text from the displayable copy:
    hostile text changes the message, never which Event a retry finds."""
    sink = KubernetesSink(api_of(fake))
    hostile = message(event_id="ID\u202e\x1b[2J")
    sink.send(hostile)
    sink.send(replace(hostile, attempt=1))
    ((_, event),) = fake.events.items()
    assert "\x1b" not in event["message"] and "\u202e" not in event["message"]


def _page_reasons() -> dict[str, str]:
    """docs/channels/kubernetes.md's table of Event reasons: '`kind` (qualifier)' -> reason."""
    text = page("channels/kubernetes.md")
    table = re.split(r"\| transition \| reason \|\n *\|---\|---\|\n", text, maxsplit=1)[1]
    table = table.split("\n\n", 1)[0]
    rows = [line.strip().strip("|").split("|") for line in table.splitlines()]
    return {kind.strip(): why.strip().strip("`") for kind, why in rows}


@pytest.mark.parametrize("event_type", ["Reboot", "Redeploy", "Freeze", "Preempt", "Terminate"])
def test_every_transition_has_the_reason_the_docs_say(event_type: str) -> None:
    """AKS's own reasons where the fact is the same; sebridge's own say type and fact. The
    table is what a cluster admin writes alerts from: every kind is in it, as sent."""
    said = _page_reasons()
    for kind in TransitionKind:
        for stage in ("prepare", "recover"):
            if kind == TransitionKind.SCHEDULED:
                row = f"`{kind}` ({'a Freeze' if event_type == 'Freeze' else 'any other type'})"
            elif kind == TransitionKind.HOOK_STARTED:
                row = f"`{kind}` ({'a prepare hook: the drain' if stage == 'prepare' else 'a recover hook'})"
            else:
                row = f"`{kind}`"
            assert row in said, f"the page's table of reasons lacks {row}"
            hook = HookRun("drain", stage, f"{SET}_3")
            kwargs: dict[str, Any] = {"event_type": event_type, "transition_id": 8}
            if kind.startswith("hook"):
                kwargs["hook"] = hook
            sent = event_body(Node("n", "u"), message(kind, **kwargs), "n")["reason"]
            assert sent == said[row].replace("<Type>", event_type)
