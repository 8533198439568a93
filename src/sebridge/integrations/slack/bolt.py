"""The Bolt edge: Slack payloads in, `Click`s out. Socket Mode by default, HTTP mode as an option.

Bolt's objects stop here (frameworks are converted at the edge: docs/ARCHITECTURE.md).
Every click is acked before any work is done, so Slack hears back well within
its 3 seconds whatever IMDS or the store are doing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

from slack_bolt import Ack, App
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_bolt.adapter.wsgi import SlackRequestHandler
from slack_sdk import WebClient

from sebridge.integrations.slack.actions import APPROVE, APPROVE_ANYWAY, TAKE, Click, SlackActions

__all__ = ["SocketModeService", "build_bolt_app", "slack_wsgi_app"]

log = logging.getLogger(__name__)

SOCKET_WORKERS = 10  # threads running Bolt for Socket Mode's messages (slack_sdk's default)


def build_bolt_app(
    client: WebClient,
    actions: SlackActions,
    executor: Executor,
    *,
    signing_secret: str = "",
) -> App:
    """A Bolt app that routes the Approve and "I'm on it" buttons to `actions`.

    Args:
        executor: runs the listeners after their ack; ours, so stopping ends its threads.
        signing_secret: set in HTTP mode, where every request's signature and
            age (5 minutes at most) are verified; empty in Socket Mode, where
            the authenticated websocket replaces signatures.
    """
    app = App(
        listener_executor=executor,
        client=client,
        signing_secret=signing_secret or "unused-in-socket-mode",
        request_verification_enabled=bool(signing_secret),
        token_verification_enabled=False,  # `sebridge check` runs auth.test; start-up must not
        logger=logging.getLogger("sebridge.slack.bolt"),
    )

    def listener(action: str) -> Callable[..., None]:
        def on_click(ack: Ack, body: dict[str, Any]) -> None:
            ack()
            click = _click(action, body)
            if click is None:
                log.warning("ignored a %s click without event id or user", action)
                return
            actions.handle(click)

        return on_click

    app.action(APPROVE)(listener(APPROVE))
    app.action(APPROVE_ANYWAY)(listener(APPROVE_ANYWAY))
    app.action(TAKE)(listener(TAKE))
    return app


def _click(action: str, body: dict[str, Any]) -> Click | None:
    pressed = next((a for a in body.get("actions") or () if a.get("action_id") == action), None)
    who = body.get("user") or {}
    user = who.get("id")
    # What the person is called, as the payload says it (its name, or the older username).
    name = str(who.get("name") or who.get("username") or "")
    container = body.get("container") or {}
    channel = container.get("channel_id") or (body.get("channel") or {}).get("id")
    message_ts = container.get("message_ts") or (body.get("message") or {}).get("ts")
    if not pressed or not pressed.get("value") or not user:
        return None
    return Click(
        action, str(pressed["value"]), str(user), str(channel or ""), str(message_ts or ""), name
    )


def slack_wsgi_app(app: App) -> SlackRequestHandler:
    """The WSGI application behind POST /slack/events in HTTP mode."""
    return SlackRequestHandler(app)


class SocketModeService:
    """Holds the Socket Mode connection: outbound only, no inbound port on the VM."""

    def __init__(self, app: App, app_token: str, api_url: str) -> None:
        self._handler = SocketModeHandler(
            app,
            app_token,
            web_client=WebClient(base_url=api_url),
            logger=logging.getLogger("sebridge.slack.socket"),
            concurrency=SOCKET_WORKERS,
        )
        # slack_sdk leaves its threads unnamed ("Thread-7 (_run)"); named here, before any
        # starts, each is a row of docs/ARCHITECTURE.md's thread table.
        client = self._handler.client
        client.current_session_runner.thread.name = "slack-socket-read"
        client.current_app_monitor.thread.name = "slack-socket-monitor"
        client.message_processor.thread.name = "slack-socket-queue"
        client.message_workers.shutdown(wait=False)  # its own pool, no thread of it yet
        client.message_workers = ThreadPoolExecutor(
            SOCKET_WORKERS, thread_name_prefix="slack-socket-listener"
        )

    def start(self) -> None:
        """Connect (in the background; the client reconnects by itself)."""
        self._handler.connect()  # type: ignore[no-untyped-call]
        log.info("Slack Socket Mode connected")

    def stop(self) -> None:
        """Close the connection."""
        self._handler.close()  # type: ignore[no-untyped-call]
