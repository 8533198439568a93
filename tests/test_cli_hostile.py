"""`sebridge events`, `history` and `approve` in text form show IMDS's text through `visible()`: one
row stays one line and no terminal escape reaches the terminal; --json keeps the original
(docs/ARCHITECTURE.md, "Hostile text")."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from fakes.imds_fixture import FixtureImds
from helpers import cli_main, write_config

pytestmark = pytest.mark.usefixtures("cli_in_process")

EVENT_ID = "EV\n2026-01-01 00:00:00 approved  Reboot    FORGED"
EVENT = {
    "EventId": EVENT_ID,
    "EventType": "Reb\x1b[2Joot",
    "EventStatus": "Scheduled",
    "EventSource": "Plat\u202eform",
    "Resources": ["vm0", "vm\r1"],
    "NotBefore": "soon\x07\nlater",
    "Description": "Host maintenance",
}
# What a terminal would act on: controls but the lines print() ends, bidi overrides.
ACTING = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e]")


@pytest.fixture
def cfg(tmp_path: Path) -> Iterator[str]:
    with FixtureImds({"DocumentIncarnation": 1, "Events": [EVENT]}) as imds:
        path = write_config(tmp_path / "sebridge.toml", endpoint=imds.url, db=tmp_path / "s.db")
        assert cli_main("once", "--config", str(path))[0] == 0
        yield str(path)


def test_events_shows_imds_text_escaped_one_row_per_event(cfg: str) -> None:
    code, out, _ = cli_main("events", "--config", cfg)
    assert code == 0
    assert not ACTING.search(out), out
    _, row = out.splitlines()
    assert row.startswith("EV\\n2026-01-01 00:00:00 approved  Reboot    FORGED  Reb\\x1b[2Joot  ")
    assert 'unknown ("soon\\x07\\nlater")' in row
    assert "Plat\\u202eform" in row and "vm0,vm\\r1" in row

    code, out, _ = cli_main("events", "--json", "--config", cfg)
    (event,) = json.loads(out)
    assert (event["event_id"], event["event_type"]) == (EVENT_ID, EVENT["EventType"])
    assert event["resources"] == EVENT["Resources"]
    assert event["not_before_text"] == EVENT["NotBefore"]


def test_history_shows_imds_text_escaped_one_line_per_entry(cfg: str) -> None:
    assert cli_main("approve", "NO\x1b[2J\nSUCH", "--as", "eve\x07", "--config", cfg)[0] == 3
    code, out, _ = cli_main("history", "--config", cfg)
    assert code == 0
    assert not ACTING.search(out), out
    scheduled, refused = out.splitlines()
    assert "scheduled Reb\\x1b[2Joot EV\\n2026-01-01 00:00:00 approved  Reboot    FORGED" in (
        scheduled
    )
    assert "NO\\x1b[2J\\nSUCH by eve\\x07 via cli" in refused

    code, out, _ = cli_main("history", "--json", "--config", cfg)
    (entry,) = json.loads(out)
    assert (entry["event_id"], entry["event_type"]) == (EVENT_ID, EVENT["EventType"])


def test_approve_says_a_hostile_id_escaped_and_takes_it_as_events_shows_it(cfg: str) -> None:
    code, _, err = cli_main("approve", "NO\x1b[2J\nSUCH", "--config", cfg)
    assert code == 3
    assert not ACTING.search(err) and "NO\\x1b[2J\\nSUCH" in err, err

    shown = "EV\\n2026-01-01 00:00:00 approved  Reboot    FORGED"  # as `events` shows it
    code, out, err = cli_main("approve", shown, "--as", "ann", "--config", cfg)
    assert not ACTING.search(out + err), out + err
    assert (code, out) == (0, f"approved {shown} as ann: StartRequests sent to Azure\n"), err
    code, out, _ = cli_main("history", "--json", "--config", cfg)
    approvals = [e for e in json.loads(out) if e["kind"] != "scheduled"]
    assert [(e["event_id"], e["actor"]) for e in approvals] == [(EVENT_ID, "ann")], approvals
