"""The rigs of the integration contract (test_integration_contract.py), one per integration.

A new integration brings its rig here (rigs/<name>.py, and a line in RIGS), as it
brings its folder and a line in the registry; the contract checks that none is missing.
"""

from __future__ import annotations

from rigs.base import MARKUP, Rig
from rigs.email import EmailRig
from rigs.jira import JiraRig
from rigs.jsonpost import JsonPostRig
from rigs.kubernetes import KubernetesRig
from rigs.local import ConsoleRig, JsonlRig
from rigs.slack import SlackRig
from rigs.teams import TeamsRig
from rigs.webhook import WebhookRig

__all__ = ["MARKUP", "RIGS", "Rig"]

# Registry order, then the throwaway.
RIGS: tuple[type[Rig], ...] = (
    ConsoleRig,
    JsonlRig,
    SlackRig,
    TeamsRig,
    JiraRig,
    EmailRig,
    KubernetesRig,
    WebhookRig,
    JsonPostRig,
)
