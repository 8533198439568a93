"""Puts the Slack pieces together: the sink, and the click path back to the approver.

Socket Mode when slack.app_token is set (no inbound port); otherwise HTTP
mode, Bolt behind POST /slack/events on the bridge's HTTP server.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sebridge.config import Config
from sebridge.daemon import Daemon, Service
from sebridge.model import Transition
from sebridge.sinks.base import Message
from sebridge.sinks.slack import SlackSink
from sebridge.store import EventRecord
from sebridge.web.server import HttpServer
from sebridge.web.slack_actions import SlackActions
from sebridge.web.slack_app import SocketModeService, build_bolt_app, slack_wsgi_app
from sebridge.web.slack_approvers import SlackApprovers

__all__ = ["slack_service"]


def slack_service(config: Config, daemon: Daemon, sink: SlackSink) -> Service:
    """The service that receives Slack clicks for this daemon."""
    slack = config.slack
    client = sink.client

    def show_state(channel: str, ts: str, record: EventRecord, note: str) -> None:
        approval = record.approval
        approved_by = (
            approval.actor if approval and approval.state in ("posted", "dry_run") else None
        )
        transition = Transition(record.state, record.event, datetime.now(UTC))
        message = Message(
            transition,
            daemon.vm_name(),
            record.policy,
            dry_run=config.policy.dry_run,
            approved_by=approved_by or "nobody",  # never approvable again: no buttons
        )
        sink.show(channel, ts, message, note)

    actions = SlackActions(
        daemon.approver,
        daemon.store,
        SlackApprovers(client, slack.approvers),
        client,
        carry_out=daemon.carry_out_approvals,
        show_state=show_state,
        sinks=lambda: daemon.sinks_for("notify"),
    )
    if slack.socket_mode:
        app = build_bolt_app(client, actions)
        return SocketModeService(app, slack.app_token.reveal(), slack.api_url)
    app = build_bolt_app(client, actions, signing_secret=slack.signing_secret.reveal())
    return HttpServer(
        config.http.listen_host,
        config.http.listen_port,
        {"/slack/events": slack_wsgi_app(app)},
    )
