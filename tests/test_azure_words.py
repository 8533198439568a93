"""One wording for where an approval goes: "Azure", in every text for people (issue 34,
finding 12: "nothing was sent to IMDS" in the console, Slack and Jira beside "nothing was
sent to Azure" in Teams, the mail and the page). People know Azure; IMDS is how sebridge
reaches it.

A held approval, replayed as in tests/test_held_words.py (the daemon, the simulator, a
prepare hook that fails, every sink against the project's fakes, both stores); and every
built-in template, read as a person reads it.
"""

from __future__ import annotations

import re
from pathlib import Path

from fakes.slack import FakeSlack
from fakes.teams import FakeTeams
from helpers import carried
from sebridge.engine.daemon import Daemon
from sebridge.imds.simulator import Simulator
from sebridge.integrations.render import BUILTIN_TEMPLATES
from sebridge.model.approval import OutcomeKind
from sebridge.model.approval_request import ApprovalRequest
from test_held_words import Channels, daemon, fakes, tick

__all__ = ["daemon", "fakes"]  # the fixtures of test_held_words.py, used here

# Where an approval goes, said with IMDS: what no text for people may say any more.
IMDS_AS_DESTINATION = re.compile(r"(sent|goes|went|approvals|reaches|POSTed) to IMDS|reaches IMDS")


def test_a_held_approval_says_nothing_was_sent_to_azure_in_every_channel(
    sim: Simulator, daemon: tuple[Daemon, Channels], fakes: tuple[FakeSlack, FakeTeams, object]
) -> None:
    d, said = daemon
    event_id = sim.schedule("Redeploy", notice=900)
    tick(d)
    outcome = carried(d, ApprovalRequest(event_id, "alice", "cli"), wait=1.0)
    assert outcome.kind == OutcomeKind.HELD
    assert "StartRequests goes to Azure once they succeed" in outcome.reason  # the answer
    tick(d)

    (console,) = [x for x in said.lines() if " HELD " in x]
    parent, replies = said.slack_said()
    (slack,) = [r for r in replies if r.startswith(":no_entry:")]
    (card,) = [c for c in said.cards() if "⛔ **Held**" in c]
    _, comments = said.jira_said(event_id)
    (jira,) = [c for c in comments if c.startswith("Held:")]
    for channel, text in (("console", console), ("slack", slack), ("teams", card), ("jira", jira)):
        assert "Nothing was sent to Azure." in text, channel
    everything = [*said.lines(), parent, *replies, *said.cards(), *comments]
    assert [t for t in everything if IMDS_AS_DESTINATION.search(t)] == []


def test_no_built_in_template_says_an_approval_goes_to_imds() -> None:
    """The templates' words for people (their comments aside) say Azure."""
    found = []
    for path in sorted(Path(BUILTIN_TEMPLATES).rglob("*")):
        if path.is_file():
            text = re.sub(r"\{#.*?#\}", "", path.read_text(encoding="utf-8"), flags=re.S)
            found += [f"{path.name}: {m.group(0)}" for m in IMDS_AS_DESTINATION.finditer(text)]
    assert found == []
