"""Issue 34, finding 8: Slack's message of an event with recover hooks never reached
"Completed": the recover hook's steps after the end put its state back to "Approved by ...".

Replayed on both store dialects (conftest.py: store_url) with the daemon of
test_hooks_daemon.py, the Slack sink against the fake Slack: the message's state follows the
event's lifecycle (completed is the last word), the hook's steps after it are thread replies.
"""

from __future__ import annotations

from pathlib import Path

from fakes.slack import FakeSlack
from sebridge.imds.simulator import Simulator
from sebridge.integrations.render import Renderer
from sebridge.integrations.slack.sink import SlackSink, build_slack_client
from test_hooks_daemon import MakeDaemon, make_daemon, ran, tick

__all__ = ["make_daemon"]  # the fixture, imported for pytest

CHANNEL = "C0123456789"


def test_the_slack_message_stays_completed_while_the_recover_hooks_run(
    sim: Simulator, make_daemon: MakeDaemon, slack: FakeSlack, tmp_path: Path
) -> None:
    sink = SlackSink(build_slack_client(slack.bot_token, slack.url), CHANNEL, Renderer())
    rule = {"action": "approve", "prepare": ["drain"], "recover": ["undrain"]}
    d = make_daemon([rule], sink)  # delivered as the test's "list" sink
    event_id = sim.schedule("Reboot")
    tick(d)
    tick(d)
    assert sim.start_requests == [event_id]
    sim.start_event(event_id)
    tick(d)
    sim.complete(event_id)
    for _ in range(4):  # completed, then the recover hook's start and end, each delivered
        tick(d)
    assert "undrain:recover:vm0" in ran(tmp_path)

    (parent,) = [m for m in slack.messages.values() if m.thread_ts is None]
    (state,) = [
        b["text"]["text"]
        for b in parent.blocks or ()
        if "text" in b and b["text"]["text"].startswith("*State:*")
    ]
    assert state == "*State:* :checkered_flag: Completed"
    assert "Completed" in parent.text and "Approved" not in parent.text
    replies = [r.text for r in slack.replies(parent.channel, parent.ts)]
    done = replies.index(":checkered_flag: Completed")
    after = replies[done + 1 :]  # the recover hook's steps: thread replies after the end
    assert [r.split(" ")[0] for r in after] == [":hourglass_flowing_sand:", ":white_check_mark:"]
    assert all("undrain" in r and "vm0" in r for r in after)
    assert not any(b.get("type") == "actions" for b in parent.blocks or ())  # no button
