"""Approvals: one use case for every channel, one thread that carries them out.

- states.py: the states an approval passes through, and the one rule that says
  whether an event can still be approved;
- request.py: what a channel asks (ApprovalRequest) and what it gets back (Outcome);
- carrier.py: the thread that claims approvals and POSTs StartRequests;
- usecase.py: Approvals.request(): record once, hand to the carrier, wait for the outcome.

This module imports nothing, so the store can use states.py without pulling in the rest.
See docs/ARCHITECTURE.md, "Approve".
"""
