"""Jira: one issue per event, kept up to date; approval when a person moves the issue."""

from __future__ import annotations

from contextlib import closing
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
    reaches = "jira.url"
    settings = JiraSettings

    def validate(self, settings: JiraSettings, rd: Reader, core: Core) -> JiraSettings:
        return validate(settings, rd)

    def sink(self, ctx: Context[JiraSettings]) -> Sink:
        from sebridge.integrations.jira.client import JiraApi
        from sebridge.integrations.jira.sink import JiraSink

        return tried(JiraSink(JiraApi(ctx.settings), ctx.renderer), ctx.renderer, "jira")

    def inbound(self, ctx: Context[JiraSettings], host: Host, sink: Sink | None) -> Inbound:
        settings = ctx.settings
        if not settings.approve_status:
            return Inbound()
        from sebridge.integrations.jira.client import JiraApi
        from sebridge.integrations.jira.watcher import StatusWatcher

        # Its own client: the watcher runs on the scheduler's thread, the sink on the dispatcher's.
        # Its duty and job are the instance's: "jira-status", "jira.change-status".
        watcher = StatusWatcher(JiraApi(settings), host, name=f"{ctx.instance}-status")
        return Inbound(services=[watcher], jobs=[watcher.job()])

    def check(self, ctx: Context[JiraSettings]) -> Sequence[Finding]:
        from sebridge.integrations.jira.client import JiraApi
        from sebridge.integrations.jira.doctor import check_jira

        with closing(JiraApi(ctx.settings)) as api:
            return check_jira(api)

    def send_test(self, ctx: Context[JiraSettings], note: TrialNote) -> Sequence[Finding]:
        from sebridge.integrations.jira.client import JiraApi
        from sebridge.integrations.jira.trial import send_trial

        with closing(JiraApi(ctx.settings)) as api:
            return [send_trial(api, note)]
