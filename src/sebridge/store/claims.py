"""Owned claims: every claim of an outbox row or an approval carries a token of its own.

A claim is taken under a lease (claimed_until) and names its claimant (claimed_by); the
token says which claim it is. Every later write of the row (an attempt begun, a lease
renewed, the outcome) names the token, `WHERE ... AND claim_token = ?`: when the lease
ran out and another agent (or this agent, restarted) claimed the row meanwhile, the
stale holder's write matches nothing, changes nothing, and its caller hears False
("lost"). One agent's `fail()` can no longer overwrite another's `delivered`.
"""

from __future__ import annotations

import os

__all__ = ["new_token"]


def new_token() -> str:
    """A fresh claim token: random, so no restart or other agent can hold the same one."""
    # os.urandom is what secrets.token_hex reads; the secrets module would bring hmac and
    # OpenSSL's hashes into every daemon's start for this one call.
    return os.urandom(8).hex()
