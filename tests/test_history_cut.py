"""Issue 34, finding 12 (part): `sebridge history` showed the newest 100 rows without saying
so. When it shows only the newest N, it says how many of how many, and how to see the rest
(`--limit`, which `history --help` documents). On both store dialects (conftest.py:
store_url)."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest

from sebridge.cli import main as cli
from sebridge.cli import reading
from sebridge.config.loader import from_mapping
from sebridge.model import Document, ScheduledEvent, Transition, TransitionKind
from sebridge.model.records import AuditEntry
from sebridge.store import Store

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def test_history_says_when_it_shows_only_the_newest(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = Store(store_url, agent="vm0")
    try:
        for n in range(7):  # seven events, one transition each, and one refused click
            e = ScheduledEvent(f"E{n}", "Reboot", "Scheduled", ("vm0",), not_before=T0)
            at = T0 + timedelta(seconds=n)
            store.documents.apply(
                Document(n, (e,)), [(Transition(TransitionKind.SCHEDULED, e, at), [])], at
            )
        store.history.audit(AuditEntry(T0, "E0", "mallory", "slack", "refused", "not an approver"))
    finally:
        store.close()
    config = from_mapping({"store": {"url": store_url}})

    out = io.StringIO()
    assert reading.history(config, event_id=None, limit=3, as_json=False, out=out) == 0
    lines = out.getvalue().splitlines()
    assert [line.split()[4] for line in lines if " scheduled " in line] == ["E4", "E5", "E6"]
    assert lines[-1] == ("(showing the newest 3 of 7 transitions; --limit 7 shows them all)")
    # The JSON stays one document; the cut is said on stderr.
    out = io.StringIO()
    assert reading.history(config, event_id=None, limit=3, as_json=True, out=out) == 0
    assert "newest 3 of 7" in capsys.readouterr().err
    # Everything shown: nothing to say.
    out = io.StringIO()
    assert reading.history(config, event_id=None, limit=100, as_json=False, out=out) == 0
    assert "showing" not in out.getvalue()
    # One event's history counts that event's rows only: E0's one transition and one refusal.
    out = io.StringIO()
    assert reading.history(config, event_id="E0", limit=1, as_json=False, out=out) == 0
    assert "showing" not in out.getvalue() and "refused" in out.getvalue()


def test_history_help_documents_the_limit(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["history", "--help"])
    said = " ".join(capsys.readouterr().out.split())
    assert "--limit N show the newest N transitions and refused actions (default 100)" in said
    with pytest.raises(SystemExit):
        cli.main(["history", "--limit", "0"])
    assert "--limit: must be 1 or more, got '0'" in capsys.readouterr().err
