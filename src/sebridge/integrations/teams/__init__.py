"""Microsoft Teams: a card per transition through a Workflows webhook (or a legacy connector).

Teams cannot send a click back, so approval is the card's "Approve…" link to
the core's approval page (`[http] public_url`, sebridge.links).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sebridge.config_reader import Reader
from sebridge.integrations.base import Context, Finding, Integration
from sebridge.integrations.teams.settings import TeamsSettings, validate

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sebridge.config import Config
    from sebridge.sink import Sink

__all__ = ["Teams", "TeamsSettings"]


class Teams(Integration[TeamsSettings]):
    """requests and pymsteams are imported only when Teams is on."""

    name = "teams"
    title = "Microsoft Teams"
    outbound = True
    settings = TeamsSettings

    def enabled(self, config: Config) -> bool:
        return self.settings_of(config).enabled

    def validate(self, settings: TeamsSettings, config: Config, rd: Reader) -> TeamsSettings:
        return validate(settings, rd, links=bool(config.http.public_url))

    def sink(self, ctx: Context) -> Sink:
        from sebridge.integrations.teams.sink import TeamsSink

        teams = self.settings_of(ctx.config)
        sink = TeamsSink(
            teams.webhook_url.reveal(), ctx.renderer, format=teams.format, timeout=teams.timeout
        )
        try:
            sink.check_templates()
        except Exception:
            sink.close()
            raise
        return sink

    def check(self, ctx: Context) -> Sequence[Finding]:
        from sebridge.integrations.teams.doctor import check_teams

        return check_teams(self.settings_of(ctx.config), bool(ctx.config.http.public_url))
