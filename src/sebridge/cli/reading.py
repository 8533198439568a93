"""The commands that read the store: `events` (the current events, what happens next,
approval links) and `history` (transitions, deliveries and refused actions)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TextIO

from sebridge.cli.exits import FAILED, OK
from sebridge.cli.format import not_yet
from sebridge.cli.runtime import (
    fleet_timing,
    missing_store,
    open_store,
)
from sebridge.config.loader import Config
from sebridge.hooks.readiness import agents, readiness
from sebridge.integrations.registry import load_config
from sebridge.kernel.clock import utcnow
from sebridge.kernel.errors import ConfigError
from sebridge.kernel.text import visible
from sebridge.model import ScheduledEvent
from sebridge.model.readiness import VmReadiness
from sebridge.model.records import EventRecord
from sebridge.model.wording.outlook import not_ready
from sebridge.store import Store

__all__ = ["events", "history"]


def events(config: Config, *, as_json: bool, show_all: bool, out: TextIO | None = None) -> int:
    """The events in the latest document (and, with --all, those gone in the last day)."""
    from sebridge.cli import format as fmt  # the commands that print alone load it

    out = out or sys.stdout
    if missing_store(config) is not None:  # looked at, never created
        print("[]" if as_json else f"no events: {not_yet(missing_store(config))}", file=out)
        return OK
    store = open_store(config, migrate=False)  # reads: an older schema is refused, not moved
    now = utcnow()
    try:
        records = store.events.current(
            include_gone_since=now - timedelta(days=1) if show_all else None
        )
        polled = store.documents.any_recorded()
        vms = _readiness(store, records, now, config)
        link = _approval_link(config, store)
    finally:
        store.close()
    later = {r.event.event_id: fmt.next_of(r, vms.get(r.event.event_id, ()), now) for r in records}
    if as_json:
        fmt.dump(
            [
                fmt.event_json(
                    r,
                    later=later[r.event.event_id],
                    not_ready=not_ready(vms.get(r.event.event_id, ())),
                    approve_url=link(r.event) if link else None,
                    readiness=vms.get(r.event.event_id, ()),
                )
                for r in records
            ],
            out,
        )
        return OK
    if not records:
        said = (
            "no events (IMDS's latest document is empty)"
            if polled
            else "no events: sebridge has not polled IMDS yet (is `sebridge run` running?)"
        )
        print(said, file=out)
        return OK
    rows = [
        [
            r.event.event_id,
            r.event.event_type,
            r.state if r.present else f"{r.state} (gone)",
            fmt.when(r, now),
            r.event.source or "-",
            ",".join(r.event.resources) or "-",
            r.policy,
            fmt.approved_by(r.approval) if r.approval else "-",
            " ".join(f"{d.sink}:{d.state}" for d in r.deliveries) or "-",
        ]
        for r in records
    ]
    head = [
        "EVENT ID",
        "TYPE",
        "STATE",
        "NOT BEFORE",
        "SOURCE",
        "RESOURCES",
        "POLICY",
        "APPROVED BY",
        "DELIVERIES",
    ]
    fmt.table(head, rows, out)
    for r in records:
        if later[r.event.event_id].held:
            for line in fmt.held_lines(r, later[r.event.event_id]):
                print(line, file=out)
        for d in r.deliveries:
            if d.state == "failed":
                print(visible(f"! {r.event.event_id} {d.sink}: {d.last_error}"), file=out)
    return OK


def _readiness(
    store: Store, records: list[EventRecord], now: datetime, config: Config
) -> dict[str, tuple[VmReadiness, ...]]:
    """Each listed VM's readiness, by event, for the events whose rule names prepare hooks
    (what the daemon's messages show: hooks/readiness.py)."""
    with_hooks = [r for r in records if r.decision.prepare and r.present]
    if not with_hooks:
        return {}
    from sebridge.hooks.agent import timeouts

    # As the daemons' gate sees the fleet ([fleet]): live, silent since when, or no agent.
    known_for, silent_after = fleet_timing(config)
    fleet = agents(store.agents.known(now, known_for), "", now, silent_after)
    return {
        r.event.event_id: readiness(
            r.event,
            r.decision.prepare,
            store.hook_runs.of_event(r.event.event_id),
            live=fleet.live,
            now=now,
            timeout_of=timeouts(config.hooks),
            dry_run=config.policy.dry_run,
            silent=fleet.silent,
        ).vms
        for r in with_hooks
    }


def _approval_link(config: Config, store: Store) -> Callable[[ScheduledEvent], str] | None:
    """Each event's approval link, when links are on (`[http] public_url`) and their key
    is known: `link_secret`, or the one the daemon generated and kept in the store (never
    made here). `events` loads no secrets (it works where only the service can read
    them), so a configured `link_secret` is read now, with the config's other secrets;
    when this user cannot read them, there is no link (the command still works)."""
    if not config.http.public_url:
        return None
    from sebridge.web.links import LINK_KEY_SETTING, LinkSigner, approval_link  # links on

    secret = config.http.link_secret
    if secret.is_unread:
        try:
            secret = load_config(config.source).http.link_secret
        except ConfigError:
            return None
    key = secret.reveal() or store.settings.get(LINK_KEY_SETTING)
    return approval_link(config.http.public_url, LinkSigner(key)) if key else None


def history(
    config: Config, *, event_id: str | None, limit: int, as_json: bool, out: TextIO | None = None
) -> int:
    """Transitions with their deliveries and refused actions, in time order, oldest first."""
    from sebridge.cli import format as fmt  # the commands that print alone load it

    out = out or sys.stdout
    if missing_store(config) is not None:
        if event_id is not None:
            print(
                f"sebridge: unknown event {event_id}: {not_yet(missing_store(config))}",
                file=sys.stderr,
            )
            return FAILED
        print("[]" if as_json else f"no history yet: {not_yet(missing_store(config))}", file=out)
        return OK
    store = open_store(config, migrate=False)
    try:
        known = event_id is None or store.events.get(event_id) is not None
        entries = store.history.entries(event_id=event_id, limit=limit)
        audit = store.history.audit_entries(event_id=event_id, limit=limit)
        sizes = store.history.size(event_id=event_id)
    finally:
        store.close()
    if not known:
        print(
            f"sebridge: unknown event {event_id}: sebridge has not seen it in any IMDS document "
            "(see `sebridge events --all`)",
            file=sys.stderr,
        )
        return FAILED
    cut = fmt.cut_note(len(entries), len(audit), sizes)
    if as_json:
        fmt.dump([fmt.history_json(e) for e in entries], out)
        if cut:  # the JSON stays one document; a person at the terminal still hears it
            print(f"sebridge: {cut}", file=sys.stderr)
        return OK
    for line in fmt.history_lines(entries, audit):
        print(line, file=out)
    if not entries and not audit:
        print("no history yet", file=out)
    if cut:
        print(cut, file=out)
    return OK
