"""Slack: one message per event with Approve buttons, clicks back by Socket Mode or HTTP."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sebridge.config_reader import Reader
from sebridge.integrations.base import Context, Finding, Host, Inbound, Integration
from sebridge.integrations.slack.settings import SlackSettings, validate

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sebridge.config import Config
    from sebridge.sink import Sink

__all__ = ["Slack", "SlackSettings"]


class Slack(Integration[SlackSettings]):
    """slack_sdk and slack_bolt are imported only when Slack is on (memory, start-up)."""

    name = "slack"
    title = "Slack"
    outbound = True
    settings = SlackSettings

    def enabled(self, config: Config) -> bool:
        return self.settings_of(config).enabled

    def validate(self, settings: SlackSettings, config: Config, rd: Reader) -> SlackSettings:
        return validate(settings, rd)

    def sink(self, ctx: Context) -> Sink:
        from sebridge.integrations.slack.sink import SlackSink, build_slack_client

        slack = self.settings_of(ctx.config)
        sink = SlackSink(
            build_slack_client(slack.bot_token.reveal(), slack.api_url),
            slack.channel,
            ctx.renderer,
            mention=slack.mention,
            mention_types=slack.mention_types,
        )
        sink.check_templates()
        return sink

    def inbound(self, ctx: Context, host: Host, sink: Sink | None) -> Inbound:
        from sebridge.integrations.slack.sink import SlackSink
        from sebridge.integrations.slack.wiring import click_inbound

        assert isinstance(sink, SlackSink)  # built by sink() above
        return click_inbound(self.settings_of(ctx.config), ctx.config.policy.dry_run, host, sink)

    def check(self, ctx: Context) -> Sequence[Finding]:
        from sebridge.integrations.slack.doctor import check_slack
        from sebridge.integrations.slack.sink import build_slack_client

        slack = self.settings_of(ctx.config)
        return check_slack(slack, build_slack_client(slack.bot_token.reveal(), slack.api_url))
