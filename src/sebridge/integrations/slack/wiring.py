"""Puts the Slack pieces together: the sink, and the click path back to the approver.

Socket Mode when slack.app_token is set (no inbound port); otherwise HTTP
mode, Bolt behind POST /slack/events on the bridge's HTTP server.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from sebridge.config import Config
from sebridge.daemon import Daemon, Service
from sebridge.integrations.slack.actions import SlackActions
from sebridge.integrations.slack.approvers import SlackApprovers
from sebridge.integrations.slack.bolt import SocketModeService, build_bolt_app, slack_wsgi_app
from sebridge.integrations.slack.sink import SlackSink
from sebridge.model import Transition
from sebridge.sink import Message
from sebridge.store import EventRecord
from sebridge.web.server import HttpServer

__all__ = ["SlackClickService", "slack_service"]


def slack_service(config: Config, daemon: Daemon, sink: SlackSink) -> Service:
    """The service that receives Slack clicks for this daemon."""
    slack = config.slack
    client = sink.client

    def show_state(channel: str, ts: str, record: EventRecord, note: str) -> None:
        # Only gone (completed, cancelled) and started events get here, and a
        # Message of either is not approvable: the redrawn message has no buttons.
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
            approved_by=approved_by,
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
    executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="slack-click")
    service: Service
    if slack.socket_mode:
        app = build_bolt_app(client, actions, executor)
        service = SocketModeService(app, slack.app_token.reveal(), slack.api_url)
    else:
        secret = slack.signing_secret.reveal()
        app = build_bolt_app(client, actions, executor, signing_secret=secret)
        service = HttpServer(
            config.http.listen_host,
            config.http.listen_port,
            {"/slack/events": slack_wsgi_app(app)},
        )
    return SlackClickService(service, executor)


class SlackClickService:
    """Receives clicks (Socket Mode or HTTP); its handlers run on `executor`, ended with it."""

    def __init__(self, service: Service, executor: ThreadPoolExecutor) -> None:
        self._service = service
        self._executor = executor

    @property
    def port(self) -> int | None:
        """The HTTP port in HTTP mode (useful with port 0); None in Socket Mode."""
        return self._service.port if isinstance(self._service, HttpServer) else None

    def start(self) -> None:
        """Connect to Slack, or start serving /slack/events."""
        self._service.start()

    def stop(self) -> None:
        """Disconnect or stop serving, then end the click handlers' threads."""
        self._service.stop()
        self._executor.shutdown(wait=True)
