"""E-mail: one mail per transition over SMTP (TLS verified), one thread per event.

A mail cannot send a click back: approval is the mail's "Approve…" link to
the core's approval page (`[http] public_url`), which a GET only shows (mail
scanners open every link) and a POST from its button approves. smtplib and
the sink load only when e-mail is configured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sebridge.config.reader import Reader
from sebridge.integrations.base import Context, Core, Finding, Integration, TrialNote, tried
from sebridge.integrations.email.settings import EmailSettings, validate
from sebridge.model.kinds import FOLDED

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sebridge.model.message import Sink

__all__ = ["Email", "EmailSettings"]


class Email(Integration[EmailSettings]):
    """Every part is built under the integration's name, the section it was read from."""

    name = "email"
    title = "E-mail"
    outbound = True
    settings = EmailSettings
    transitions = FOLDED  # a handful of mails or cards per event, not every hook step

    def validate(self, settings: EmailSettings, rd: Reader, core: Core) -> EmailSettings:
        return validate(settings, rd, self.name)

    def sink(self, ctx: Context[EmailSettings]) -> Sink:
        from sebridge.integrations.email.sink import EmailSink

        return tried(EmailSink(ctx.settings, ctx.renderer, ctx.instance), ctx.renderer, "email")

    def check(self, ctx: Context[EmailSettings]) -> Sequence[Finding]:
        from sebridge.integrations.email.doctor import check_email

        return check_email(ctx.settings, ctx.instance, ctx.core.links, send_test=ctx.send_test)

    def send_test(self, ctx: Context[EmailSettings], note: TrialNote) -> Sequence[Finding]:
        from sebridge.integrations.email.trial import send_trial

        return [send_trial(ctx.settings, ctx.instance, note)]
