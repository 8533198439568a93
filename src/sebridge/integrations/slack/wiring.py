"""The click path back to the approver: Socket Mode, or HTTP mode's /slack/events.

Socket Mode when slack.app_token is set (no inbound port); otherwise HTTP
mode, Bolt behind POST /slack/events on the daemon's HTTP server. Each
instance has its own: `[slack.dba]` its own Socket Mode connection (its own
duty, "slack.dba.socket"), or its own path, /slack/dba/events, verified with
its own signing secret.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from sebridge.integrations.base import Context, Host, Inbound
from sebridge.integrations.slack.actions import SlackActions
from sebridge.integrations.slack.approvers import SlackApprovers
from sebridge.integrations.slack.bolt import SocketModeService, build_bolt_app, slack_wsgi_app
from sebridge.integrations.slack.guard import guarded
from sebridge.integrations.slack.settings import SlackSettings
from sebridge.integrations.slack.sink import SlackSink
from sebridge.kernel.clock import utcnow
from sebridge.model import Transition
from sebridge.model.message import Message
from sebridge.model.records import EventRecord
from sebridge.model.services import Service, SingleHolder

__all__ = ["SlackClickService", "click_inbound"]


def click_inbound(ctx: Context[SlackSettings], daemon: Host, sink: SlackSink) -> Inbound:
    """What receives one instance's Slack clicks for this daemon: a service, and a route
    in HTTP mode (the instance's name tells its route and duty apart)."""
    slack, dry_run = ctx.settings, ctx.core.dry_run
    client = sink.client

    def show_state(channel: str, ts: str, record: EventRecord, note: str) -> None:
        # Only gone (completed, cancelled) and started events get here, and a
        # Message of either is not approvable: the redrawn message has no buttons.
        approval = record.approval
        who, who_id, anyway = None, None, False
        if approval and approval.carried_out:  # who decided: one approving anyway, if any
            who, _, who_id = approval.decider
            anyway = approval.anyway_by is not None
        transition = Transition(record.state, record.event, utcnow())
        message = Message(
            transition,
            daemon.vm_name(),
            record.policy,
            dry_run=dry_run,
            approved_by=who,
            approved_by_id=who_id,
            approved_anyway=anyway,
            approval_state=approval.state if approval else None,
            event_state=record.state,
        )
        sink.show(channel, ts, message, note)

    actions = SlackActions(
        daemon.approvals, SlackApprovers(client, slack.approvers), client, show_state=show_state
    )
    executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="slack-click")
    if slack.socket_mode:
        app = build_bolt_app(client, actions, executor)
        token = slack.app_token.reveal()
        # At most socket_connections agents of a fleet connect (Slack allows 10 per app);
        # when one dies, a standby agent connects in its place.
        socket = SingleHolder(
            f"{ctx.instance}.socket",
            slack.socket_connections,
            lambda: SocketModeService(app, token, slack.api_url),
        )
        return Inbound(services=[SlackClickService(None, executor), socket])
    secret = slack.signing_secret.reveal()
    app = build_bolt_app(client, actions, executor, signing_secret=secret)
    return Inbound(
        routes={ctx.path("slack", "events"): guarded(slack_wsgi_app(app), secret)},
        services=[SlackClickService(None, executor)],
    )


class SlackClickService:
    """Holds the click handlers' threads (and a Socket Mode connection, when given one;
    click_inbound gives none: the connection is a SingleHolder service of its own)."""

    def __init__(self, socket: Service | None, executor: ThreadPoolExecutor) -> None:
        self._socket = socket
        self._executor = executor

    def start(self) -> None:
        """Connect to Slack in Socket Mode; in HTTP mode the daemon's server serves clicks."""
        if self._socket:
            self._socket.start()

    def stop(self) -> None:
        """Disconnect, then end the click handlers' threads."""
        if self._socket:
            self._socket.stop()
        self._executor.shutdown(wait=True)
