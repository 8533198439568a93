"""Approvals: one use case for every channel, one thread that carries them out.

- request.py: what a channel asks (ApprovalRequest) and what it gets back (Outcome);
- carrier.py: the thread that claims approvals and POSTs StartRequests;
- usecase.py: Approvals.request(): record once, hand to the carrier, wait for the outcome;
- assembly.py: the two put together, once, for the daemon and for `sebridge approve`;
- counts.py: what they count, as two calls (the engine's metrics answer them).

The states an approval passes through, and the one rule that says whether an event
can still be approved, are words of the model (model/approval.py): the store uses
them too.
See docs/ARCHITECTURE.md, "Approve".
"""
