"""A webhook: one signed POST per transition (Standard Webhooks), its body the transition's
JSON or a template's rendering (PagerDuty, a chat webhook, your own automation).

The section's name comes from the registry: the instance's (`webhook`, or
`webhook.pagerduty` for `[webhook.pagerduty]`: its outbox key, the seed of its
webhook-id, the name its errors say); nothing below assumes it. standardwebhooks,
Jinja's sandbox and the sink are imported only when a webhook is on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sebridge.config.reader import Reader
from sebridge.integrations.base import Context, Core, Finding, Integration, TrialNote, tried
from sebridge.integrations.webhook.settings import WebhookSettings, validate

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sebridge.integrations.webhook.sink import WebhookSink
    from sebridge.model.message import Sink

__all__ = ["Webhook", "WebhookSettings"]


class Webhook(Integration[WebhookSettings]):
    """A generic signed webhook."""

    name = "webhook"
    title = "webhook"
    outbound = True
    settings = WebhookSettings

    def validate(self, settings: WebhookSettings, rd: Reader, core: Core) -> WebhookSettings:
        return validate(settings, rd, self.name)

    def sink(self, ctx: Context[WebhookSettings]) -> Sink:
        return tried(build_sink(ctx.instance, ctx.settings))

    def check(self, ctx: Context[WebhookSettings]) -> Sequence[Finding]:
        from sebridge.integrations.webhook.trial import check_webhook

        return check_webhook(ctx.instance, ctx.settings, send_test=ctx.send_test)

    def send_test(self, ctx: Context[WebhookSettings], note: TrialNote) -> Sequence[Finding]:
        from sebridge.integrations.webhook.trial import send_trial

        return [send_trial(ctx.instance, build_sink(ctx.instance, ctx.settings), note)]


def build_sink(name: str, s: WebhookSettings) -> WebhookSink:
    """The sink of section `name`, its template compiled (not yet tried)."""
    from sebridge.integrations.webhook.body import JSON, Body
    from sebridge.integrations.webhook.settings import signing_keys
    from sebridge.integrations.webhook.sink import WebhookSink

    headers = {header: value.reveal() for header, value in s.headers.items()}
    variables = {var: value.reveal() for var, value in s.vars.items()}
    content_type = next((v for h, v in headers.items() if h.lower() == "content-type"), JSON)
    return WebhookSink(
        name,
        s.url.reveal(),
        signing_keys(s.secret.reveal()),
        Body(name, s.template, variables, content_type),
        headers=headers,
        timeout=s.timeout,
        secrets=list(variables.values()),
    )
