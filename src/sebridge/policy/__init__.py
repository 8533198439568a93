"""The policy: ordered rules decide, per event first seen, approve / ask / inform / ignore.

rules.py: Rule, Policy, decide() (the Decision they give is a word of the model,
model/decision.py); matchers.py: what a rule
matches on; compile.py: the Policy from config (configured or built-in
rules); explain.py: why each rule did or did not match. See
docs/ARCHITECTURE.md, "Policy".
"""

from __future__ import annotations

from sebridge.policy.rules import Policy, Rule, decide

__all__ = ["Policy", "Rule", "decide"]
