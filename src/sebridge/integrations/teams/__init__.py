"""Microsoft Teams: a card per transition through a Workflows webhook (or a legacy connector).

Teams cannot send a click back, so approval is the card's "Approve…" link to
the core's approval page (`[http] public_url`, sebridge.links).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sebridge.config.reader import Reader
from sebridge.integrations.base import Context, Core, Finding, Integration, TrialNote, tried
from sebridge.integrations.teams.settings import TeamsSettings, validate
from sebridge.model.kinds import FOLDED

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sebridge.integrations.render import Renderer
    from sebridge.integrations.teams.sink import TeamsSink
    from sebridge.model.message import Sink

__all__ = ["Teams", "TeamsSettings"]


class Teams(Integration[TeamsSettings]):
    """The sink is imported only when Teams is on (pymsteams only for MessageCards)."""

    name = "teams"
    title = "Microsoft Teams"
    outbound = True
    reaches = "teams.webhook_url"
    settings = TeamsSettings
    transitions = FOLDED  # a handful of mails or cards per event, not every hook step

    def validate(self, settings: TeamsSettings, rd: Reader, core: Core) -> TeamsSettings:
        return validate(settings, rd)

    def sink(self, ctx: Context[TeamsSettings]) -> Sink:
        return tried(_sink(ctx.settings, ctx.renderer), ctx.renderer, "teams")

    def check(self, ctx: Context[TeamsSettings]) -> Sequence[Finding]:
        from sebridge.integrations.teams.doctor import check_teams

        return check_teams(ctx.settings, ctx.core.links, send_test=ctx.send_test)

    def send_test(self, ctx: Context[TeamsSettings], note: TrialNote) -> Sequence[Finding]:
        from sebridge.integrations.teams.trial import send_trial

        return [send_trial(_sink(ctx.settings, ctx.renderer), ctx.settings.format, note)]


def _sink(teams: TeamsSettings, renderer: Renderer) -> TeamsSink:
    from sebridge.integrations.teams.sink import TeamsSink

    return TeamsSink(
        teams.webhook_url.reveal(), renderer, format=teams.format, timeout=teams.timeout
    )
