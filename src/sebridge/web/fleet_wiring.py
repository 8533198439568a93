"""The fleet page's routes, put together from the configuration and the daemon's parts.

Imported by cli/serving.py only when `[web] page = true`: a daemon without the
page loads none of it (nor icalendar). See docs/fleet-page.md.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Protocol

from sebridge.config.loader import Config
from sebridge.hooks.agent import timeouts
from sebridge.integrations.render import Renderer
from sebridge.kernel.clock import utcnow
from sebridge.kernel.redact import Masker
from sebridge.kernel.wsgi import WsgiApp
from sebridge.model.approval_request import ApprovalRequest, Outcome
from sebridge.model.decision import Decision
from sebridge.store import Store
from sebridge.store.database import Database
from sebridge.store.fleet_view import FleetView
from sebridge.store.hook_retries import RetryAnswer
from sebridge.web.calendar_feed import PREFIX, CalendarFeed
from sebridge.web.fleet_page import PAGE, PAGE_JSON, VIA, Access, FleetPage
from sebridge.web.fleet_rows import FleetRows
from sebridge.web.fleet_tokens import FleetTokens

__all__ = ["FleetHost", "calendar_url", "fleet_routes", "routes"]


def calendar_url(public_url: str, key: str) -> str:
    """The calendar feed's URL under `public_url` (what `sebridge calendar-url` prints)."""
    return f"{public_url}{PREFIX}{FleetTokens(key).calendar}.ics"


class FleetHost(Protocol):
    """What the page needs of the daemon."""

    @property
    def store(self) -> Store: ...

    @property
    def approvals(self) -> _Desk: ...

    @property
    def hook_mask(self) -> Masker: ...

    def vm_name(self) -> str: ...

    def sinks_for(self, decision: Decision) -> tuple[str, ...]: ...

    def heard(self, tables: frozenset[str]) -> None: ...


class _Desk(Protocol):
    def request(self, req: ApprovalRequest, *, wait: float = ...) -> Outcome: ...


def fleet_routes(
    config: Config, renderer: Renderer, host: FleetHost, key: str
) -> dict[str, WsgiApp]:
    """/fleet, /fleet.json and /calendar/ over the store's database (every agent's):
    approvals through the daemon's use case; a retry as `sebridge hooks retry` asks it, its
    agents woken as by another process's commit."""
    store = host.store

    def retry(event_id: str, person: str) -> RetryAnswer:
        answer = store.hook_retries.request(
            event_id,
            actor=person,
            via=VIA,
            now=utcnow(),
            sinks_for=lambda record: host.sinks_for(record.decision),
        )
        host.heard(frozenset({"hook_retries", "outbox"}))
        return answer

    return routes(
        config,
        store.db,
        renderer,
        key,
        approve=host.approvals.request,
        retry=retry,
        vm_name=host.vm_name,
        mask=host.hook_mask,
    )


def routes(
    config: Config,
    db: Database,
    renderer: Renderer,
    key: str,
    *,
    approve: Callable[[ApprovalRequest], Outcome],
    retry: Callable[[str, str], RetryAnswer],
    vm_name: Callable[[], str],
    mask: Masker,
) -> dict[str, WsgiApp]:
    """The routes over `db`, each act handed in (bench/fleet_page.py hands its own)."""
    web = config.web
    tokens = FleetTokens(key)
    rows = FleetRows(
        vm_name,
        silent_after=timedelta(seconds=config.fleet.silent_after),
        timeout_of=timeouts(config.hooks),
        dry_run=config.policy.dry_run,
        mask=mask,
    )
    page = FleetPage(
        FleetView(db),
        rows,
        renderer,
        tokens,
        Access(web.networks, web.environ_key),
        approve=approve,
        retry=retry,
        vm_name=vm_name,
        recent_days=web.recent_days,
        known_for=timedelta(seconds=config.fleet.known_for),
    )
    page.check_templates()
    public = config.http.public_url
    feed = CalendarFeed(page.read, rows, tokens, page_url=f"{public}{PAGE}" if public else "")
    return {PAGE: page, PAGE_JSON: page, PREFIX: feed}
