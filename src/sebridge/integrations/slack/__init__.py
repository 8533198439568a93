"""Slack: one message per event with Approve buttons, clicks back by Socket Mode or HTTP."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sebridge.config.reader import Reader
from sebridge.integrations.base import (
    Context,
    Core,
    Finding,
    Host,
    Inbound,
    Integration,
    TrialNote,
    tried,
)
from sebridge.integrations.slack.settings import SlackSettings, validate

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sebridge.model.message import Sink

__all__ = ["Slack", "SlackSettings"]


class Slack(Integration[SlackSettings]):
    """slack_sdk and slack_bolt are imported only when Slack is on (memory, start-up)."""

    name = "slack"
    title = "Slack"
    outbound = True
    reaches = "slack.api_url"
    settings = SlackSettings

    def validate(self, settings: SlackSettings, rd: Reader, core: Core) -> SlackSettings:
        return validate(settings, rd)

    def sink(self, ctx: Context[SlackSettings]) -> Sink:
        from sebridge.integrations.slack.sink import SlackSink, build_slack_client

        slack = ctx.settings
        return tried(
            SlackSink(
                build_slack_client(slack.bot_token.reveal(), slack.api_url),
                slack.channel,
                ctx.renderer,
                mention=slack.mention,
                mention_types=slack.mention_types,
                remind_mention=slack.remind_mention,
            ),
            ctx.renderer,
            "slack",
        )

    def inbound(self, ctx: Context[SlackSettings], host: Host, sink: Sink | None) -> Inbound:
        from sebridge.integrations.slack.sink import SlackSink
        from sebridge.integrations.slack.wiring import click_inbound

        assert isinstance(sink, SlackSink)  # built by sink() above
        return click_inbound(ctx, host, sink)

    def check(self, ctx: Context[SlackSettings]) -> Sequence[Finding]:
        from sebridge.integrations.slack.doctor import check_slack
        from sebridge.integrations.slack.sink import build_slack_client

        slack = ctx.settings
        return check_slack(slack, build_slack_client(slack.bot_token.reveal(), slack.api_url))

    def send_test(self, ctx: Context[SlackSettings], note: TrialNote) -> Sequence[Finding]:
        from sebridge.integrations.slack.sink import build_slack_client
        from sebridge.integrations.slack.trial import send_trial

        slack = ctx.settings
        client = build_slack_client(slack.bot_token.reveal(), slack.api_url)
        return [send_trial(slack, client, note)]
