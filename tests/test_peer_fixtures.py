"""Documents other projects' fixtures send (issue 10, item 6): a DocumentIncarnation that
is any JSON scalar is an opaque token; a NotBefore that is no time keeps its text and the
event is still announced, its time shown as unknown."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fakes.imds_fixture import FixtureImds
from helpers import query, read_jsonl, run_cli, write_config
from sebridge.model import Document, ScheduledEvent
from sebridge.store import Store

EVENT_ID = "F1A2B3C4-0000-4000-8000-0000000000AA"
# The shape of giantswarm's fixture: a text incarnation, a compact date for NotBefore.
PEER_DOCUMENT = {
    "DocumentIncarnation": "abc123",
    "Events": [
        {
            "EventId": EVENT_ID,
            "EventStatus": "Scheduled",
            "EventType": "Terminate",
            "ResourceType": "VirtualMachine",
            "Resources": ["vm0"],
            "NotBefore": "20170702",
        }
    ],
}


@pytest.mark.slow
def test_a_peer_fixture_document_is_announced_once(tmp_path: Path) -> None:
    out, db = tmp_path / "events.jsonl", tmp_path / "state.db"
    with FixtureImds(PEER_DOCUMENT) as imds:
        cfg = write_config(
            tmp_path / "sebridge.toml", endpoint=imds.url, db=db, jsonl=out, console=True
        )
        first = run_cli("once", "--config", str(cfg))
        again = run_cli("once", "--json", "--config", str(cfg))  # a new process: from the store
        listed = run_cli("events", "--config", str(cfg))
    assert first.returncode == 0, first.stderr
    (line,) = [ln for ln in first.stdout.splitlines() if EVENT_ID in ln]
    assert "SCHEDULED Terminate" in line
    assert 'NotBefore unknown (sent as "20170702")' in line
    (record,) = read_jsonl(out)
    assert record["transition"] == "scheduled" and record["event_id"] == EVENT_ID
    assert record["not_before"] is None and record["not_before_text"] == "20170702"
    # The same token read back from the store: unchanged, nothing announced twice.
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["transitions"] == []
    assert len(read_jsonl(out)) == 1
    assert query(db, "SELECT COUNT(*) FROM transitions") == [(1,)]
    assert 'unknown ("20170702")' in listed.stdout


_tokens = st.one_of(
    st.integers(),
    st.integers(min_value=2**63, max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.booleans(),
)


@settings(max_examples=150, deadline=None)
@given(_tokens)
def test_the_store_gives_back_the_incarnation_it_was_given(token: Any) -> None:
    store = Store("sqlite://")
    try:
        event = ScheduledEvent("E1", "Reboot", "Scheduled", ("vm0",), not_before_text="20170702")
        store.documents.apply(Document(token, (event,)), [], datetime.now(UTC))
        back = store.documents.last()
    finally:
        store.close()
    assert back is not None
    assert back.incarnation == token and type(back.incarnation) is type(token)
    assert back.events == (event,)
