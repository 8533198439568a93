"""Jira: one issue per event, kept up to date; approval when a person moves the issue."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sebridge.config_reader import Reader
from sebridge.integrations.base import Context, Finding, Host, Inbound, Integration
from sebridge.integrations.jira.settings import JiraSettings, validate

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sebridge.config import Config
    from sebridge.sink import Sink

__all__ = ["Jira", "JiraSettings"]


class Jira(Integration[JiraSettings]):
    """The jira library (and requests) is imported only when Jira is on."""

    name = "jira"
    title = "Jira"
    outbound = True
    settings = JiraSettings

    def enabled(self, config: Config) -> bool:
        return self.settings_of(config).enabled

    def validate(self, settings: JiraSettings, config: Config, rd: Reader) -> JiraSettings:
        return validate(settings, rd)

    def sink(self, ctx: Context) -> Sink:
        from sebridge.integrations.jira.client import JiraApi
        from sebridge.integrations.jira.sink import JiraSink

        sink = JiraSink(JiraApi(self.settings_of(ctx.config)), ctx.renderer)
        sink.check_templates()
        return sink

    def inbound(self, ctx: Context, host: Host, sink: Sink | None) -> Inbound:
        settings = self.settings_of(ctx.config)
        if not settings.approve_status:
            return Inbound()
        from sebridge.integrations.jira.client import JiraApi
        from sebridge.integrations.jira.watcher import StatusWatcher

        # Its own client: the watcher runs on the scheduler's thread, the sink on the dispatcher's.
        watcher = StatusWatcher(JiraApi(settings), host)
        return Inbound(services=[watcher], jobs=[watcher.job()])

    def check(self, ctx: Context) -> Sequence[Finding]:
        from sebridge.integrations.jira.client import JiraApi
        from sebridge.integrations.jira.doctor import check_jira

        api = JiraApi(self.settings_of(ctx.config))
        try:
            return check_jira(api)
        finally:
            api.close()
