"""Jira: one issue per event, kept up to date; approval when a person moves the issue."""

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
)
from sebridge.integrations.jira.settings import JiraSettings, validate

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sebridge.model.message import Sink

__all__ = ["Jira", "JiraSettings"]


class Jira(Integration[JiraSettings]):
    """The jira library (and requests) is imported only when Jira is on."""

    name = "jira"
    title = "Jira"
    outbound = True
    settings = JiraSettings

    def enabled(self, settings: JiraSettings, in_file: bool) -> bool:
        return settings.enabled

    def validate(self, settings: JiraSettings, rd: Reader, core: Core) -> JiraSettings:
        return validate(settings, rd)

    def sink(self, ctx: Context[JiraSettings]) -> Sink:
        from sebridge.integrations.jira.client import JiraApi
        from sebridge.integrations.jira.sink import JiraSink

        sink = JiraSink(JiraApi(ctx.settings), ctx.renderer)
        sink.check_templates()
        return sink

    def inbound(self, ctx: Context[JiraSettings], host: Host, sink: Sink | None) -> Inbound:
        settings = ctx.settings
        if not settings.approve_status:
            return Inbound()
        from sebridge.integrations.jira.client import JiraApi
        from sebridge.integrations.jira.watcher import StatusWatcher

        # Its own client: the watcher runs on the scheduler's thread, the sink on the dispatcher's.
        watcher = StatusWatcher(JiraApi(settings), host)
        return Inbound(services=[watcher], jobs=[watcher.job()])

    def check(self, ctx: Context[JiraSettings]) -> Sequence[Finding]:
        from sebridge.integrations.jira.client import JiraApi
        from sebridge.integrations.jira.doctor import check_jira

        api = JiraApi(ctx.settings)
        try:
            return check_jira(api)
        finally:
            api.close()

    def send_test(self, ctx: Context[JiraSettings], note: TrialNote) -> Sequence[Finding]:
        from sebridge.integrations.jira.client import JiraApi
        from sebridge.integrations.jira.trial import send_trial

        api = JiraApi(ctx.settings)
        try:
            return [send_trial(api, note)]
        finally:
            api.close()
