"""`sebridge policy explain`: which rule decides an event, and why each earlier one did not.

The event comes from the store (EVENT_ID, as `sebridge events` lists it) or
from a file (`--event FILE.json`: one event object as IMDS sends it, or a
whole Scheduled Events document holding one event). An event from the store
starts with the decision recorded when it was first seen (that is the one that
counts), and the rules are evaluated as of that moment, on the event as first
seen: a window's answer depends on the time. `--now` evaluates the event as it
is now, at this moment; `--at` at a given time; a file's event is evaluated now.
On this VM (or `--vm-name`). Exit 0; 2 on bad input.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from sebridge.cli import format as fmt
from sebridge.cli.runtime import missing_store, open_store
from sebridge.cli.runtime import vm_name as learn_vm_name
from sebridge.config.loader import Config
from sebridge.imds.parse import parse_document
from sebridge.imds.vm_name import BRIEF_WAIT
from sebridge.integrations import registry
from sebridge.kernel.clock import utcnow
from sebridge.kernel.errors import ConfigError, MalformedDocumentError
from sebridge.model import ScheduledEvent, TransitionKind
from sebridge.model.decision import Decision
from sebridge.model.wording.outlook import decided
from sebridge.policy.compile import build_policy
from sebridge.policy.explain import explain as explain_rules

__all__ = ["explain"]

OK, USAGE = 0, 2
_MAX_FILE = 1 << 20  # an IMDS document is a few KiB
_MAX_HISTORY = 10_000  # transitions read to find an event's first one (a few dozen at most)


class _BadInput(Exception):
    """Input the command cannot use; the message is the line printed."""


def explain(
    config: Config,
    *,
    event_id: str | None,
    event_file: Path | None,
    vm_name: str | None,
    at: str | None,
    as_json: bool,
    now: bool = False,
    out: TextIO | None = None,
) -> int:
    """Print the recorded decision (an event from the store), then which rule matches the
    event and why, and why each earlier rule did not."""
    out = out or sys.stdout
    first_seen: datetime | None = None  # a file's event: as if first seen now
    try:
        moment = _moment(at) if at is not None else utcnow()
        if (event_id is None) == (event_file is None):
            raise _BadInput("give an EVENT_ID (see `sebridge events`) or --event FILE.json")
        recorded: _Recorded | None = None
        if event_file is not None:
            event = _from_file(event_file)
        else:
            assert event_id is not None
            recorded = _from_store(config, event_id)
            then = not (now or at is not None)  # as of the decision: the default
            event = recorded.first_event if then else recorded.event
            moment = recorded.first_seen if then else moment
            first_seen = recorded.first_seen  # its reminders' leads count from then
        vm = vm_name or _this_vm(config)
    except _BadInput as exc:
        print(f"sebridge: policy explain: {exc}", file=sys.stderr)
        return USAGE
    result = explain_rules(
        event,
        build_policy(config.policy),
        vm,
        moment,
        first_seen,
        # Where the event goes, said once the configuration routes: without it, to every sink.
        audience=registry.audience(config) if _routes(config) else None,
        tags_of=lambda: _recorded_tags(config),
    )
    as_of = "file" if recorded is None else "now" if now else "at" if at else "first_seen"
    if as_json:
        data = result.as_json()
        data["as_of"] = as_of
        data["recorded"] = recorded.as_json() if recorded else None
        fmt.dump(data, out)
        return OK
    if recorded is not None:
        for line in recorded.lines(as_of):
            print(line, file=out)
    for line in result.lines():
        print(line, file=out)
    if recorded is not None and recorded.decision != result.decision:
        print(_differs(as_of, event), file=out)
    return OK


def _routes(config: Config) -> bool:
    """Whether some events reach only some sinks: a rule's notify, an instance's route."""
    return bool(config.routes) or any(r.notify is not None for r in config.policy.rules)


def _recorded_tags(config: Config) -> dict[str, dict[str, str]]:
    """Every VM's Azure tags as agents recorded them (asked only for a rule's `tags`)."""
    if missing_store(config) is not None:
        return {}
    store = open_store(config, migrate=False)
    try:
        return store.vm_tags.all()
    finally:
        store.close()


def _differs(as_of: str, event: ScheduledEvent) -> str:
    """Why the rules explained give another decision than the recorded one."""
    if as_of == "first_seen":
        since = "the rules (or this VM's name) changed since it was decided"
    else:
        started = " (it has started)" if event.started else ""
        since = f"the rules, the time or the event{started} changed since it was decided"
    return f"the recorded decision is the one that counts for this event: {since}"


@dataclass(frozen=True)
class _Recorded:
    """An event from the store: as first seen and as now, and the decision recorded then."""

    event: ScheduledEvent
    first_event: ScheduledEvent
    first_seen: datetime
    decision: Decision

    def lines(self, as_of: str) -> list[str]:
        d = self.decision
        when = f"{self.first_seen.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
        said = {
            "first_seen": "explained as of then, on the event as first seen (--now: as of now):",
            "now": "explained as of now, on the event as it is now (--now):",
            "at": "explained at the time given (--at), on the event as it is now:",
        }[as_of]
        return [
            f"recorded decision: {decided(d.action, d.rule)}, when first seen at {when}",
            said,
        ]

    def as_json(self) -> dict[str, Any]:
        return {
            "action": self.decision.action,
            "rule": self.decision.rule,
            "first_seen": self.first_seen.isoformat(),
        }


def _this_vm(config: Config) -> str:
    """This VM's name as `run` learns it (imds.vm_name, else IMDS's compute name, asked for
    BRIEF_WAIT); never the host name (docs/ARCHITECTURE.md, "Agent name")."""
    try:
        return learn_vm_name(config, wait=BRIEF_WAIT)
    except ConfigError as exc:
        raise _BadInput(f"{exc}, or give --vm-name") from None


def _moment(at: str | None) -> datetime:
    if at is None:
        return utcnow()
    try:
        moment = datetime.fromisoformat(at)
    except ValueError:
        raise _BadInput(
            f'--at "{at}" is no ISO 8601 time (e.g. 2024-05-04T02:30:00+02:00)'
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _from_store(config: Config, event_id: str) -> _Recorded:
    """The event as now and as first seen, its recorded decision, and when it was first
    seen (the decision's moment; its reminders' leads count from then)."""
    unknown = f"unknown event {event_id}: not in the store (see `sebridge events --all`)"
    if missing_store(config) is not None:
        raise _BadInput(f"{unknown}; sebridge has not run with this store yet")
    store = open_store(config, migrate=False)
    try:
        record = store.events.get(event_id.strip())
        history = (
            store.history.entries(event_id=event_id.strip(), limit=_MAX_HISTORY) if record else []
        )
    finally:
        store.close()
    if record is None:
        raise _BadInput(unknown)
    # The event as the decision saw it: its first transition's (later ones may have moved
    # it, or it started); the stored one when history was pruned.
    first = next(
        (
            e.transition.event
            for e in history
            if e.transition.kind in (TransitionKind.SCHEDULED, TransitionKind.UNPLANNED)
        ),
        record.event,
    )
    return _Recorded(record.event, first, record.first_seen, record.decision)


def _from_file(path: Path) -> ScheduledEvent:
    try:
        with path.open("rb") as fh:
            body = fh.read(_MAX_FILE + 1)
    except OSError as exc:
        raise _BadInput(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(body) > _MAX_FILE:
        raise _BadInput(f"{path}: over {_MAX_FILE} bytes; an IMDS document is a few KiB")
    try:
        raw: Any = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise _BadInput(f"{path}: not JSON: {str(exc).splitlines()[0]}") from None
    if isinstance(raw, dict) and "Events" not in raw and "EventId" in raw:
        raw = {"DocumentIncarnation": 0, "Events": [raw]}  # one event object
    elif isinstance(raw, dict) and "Events" in raw:
        raw.setdefault("DocumentIncarnation", 0)
    else:
        raise _BadInput(
            f"{path}: neither an event (an object with EventId) nor a Scheduled Events "
            "document (an object with Events)"
        )
    try:
        document = parse_document(json.dumps(raw), warn=_refuse)
    except MalformedDocumentError as exc:
        raise _BadInput(f"{path}: {exc}") from None
    if len(document.events) != 1:
        raise _BadInput(
            f"{path}: the document holds {len(document.events)} events; give one event "
            "(or a document with one)"
        )
    return document.events[0]


def _refuse(problem: str) -> None:
    """A person's event file is read strictly: what the daemon would read tolerantly (and
    log) is refused here, so the rule explained is the one for the event as written."""
    # Without what the daemon would do with it.
    what = problem.partition(": read as")[0].partition(": skipped")[0]
    raise MalformedDocumentError(f"IMDS {what}")
