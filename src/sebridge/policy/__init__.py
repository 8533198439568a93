"""The policy: ordered rules decide, per event first seen, approve / ask / inform / ignore.

decision.py: Decision, Rule, Policy, decide(); matchers.py: what a rule
matches on; compile.py: the Policy from config (configured or built-in
rules); explain.py: why each rule did or did not match. See
docs/ARCHITECTURE.md, "Policy".
"""

from __future__ import annotations

from sebridge.model.decision import (
    ACTIONS,
    APPROVE,
    ASK,
    IGNORE,
    INFORM,
    NO_MATCH,
    NO_RULE,
    Decision,
    offers_approval,
    sinks_for,
)
from sebridge.policy.rules import Policy, Rule, decide

__all__ = [
    "ACTIONS",
    "APPROVE",
    "ASK",
    "IGNORE",
    "INFORM",
    "NO_MATCH",
    "NO_RULE",
    "Decision",
    "Policy",
    "Rule",
    "decide",
    "offers_approval",
    "sinks_for",
]
