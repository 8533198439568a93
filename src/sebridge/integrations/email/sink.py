"""E-mail sink: one mail per transition over SMTP, threaded per event.

One attempt per `send()` (the dispatcher retries): a session is opened,
secured and signed in (smtp.py), the mail sent to every `to`, the session
closed. Delivery is at least once: a crash (or a lost answer) between the
server's 250 and the outbox's record sends that mail again on the next
attempt, with the same Message-ID, which many mail systems then show once
(docs/how-it-works.md: delivery guarantees). A server that takes the mail for some
recipients and refuses others has delivered it: the refusals are logged, and
sending again would repeat the mail to those who got it.
"""

from __future__ import annotations

import logging

from sebridge.integrations.email.errors import refused_some
from sebridge.integrations.email.mail import MailBuilder
from sebridge.integrations.email.settings import EmailSettings
from sebridge.integrations.email.smtp import SmtpServer
from sebridge.integrations.render import Renderer
from sebridge.kernel.clock import Clock, utcnow
from sebridge.model import Receipt
from sebridge.model.message import Message, shown

__all__ = ["EmailSink"]

log = logging.getLogger(__name__)


class EmailSink:
    """Mails each transition to the section's recipients.

    Args:
        section: the config section's name (the keys its errors name).
    """

    def __init__(
        self, settings: EmailSettings, renderer: Renderer, section: str, clock: Clock = utcnow
    ) -> None:
        self.server = SmtpServer(settings, section)
        self.mails = MailBuilder(
            renderer,
            sender=settings.sender,
            to=settings.to,
            domain=settings.domain,
            section=section,
            clock=clock,
        )

    def check_templates(self) -> None:
        """Render every template against sample messages; a broken one raises now."""
        self.mails.check_templates()

    def send(self, message: Message) -> Receipt | None:
        """Mail this transition. Raises RetryableDeliveryError or PermanentDeliveryError.
        Returns the receipt of the event's thread when this mail starts it."""
        mail = self.mails.build(shown(message))  # IMDS text displayable, bounded
        refused = self.server.send(mail.message)
        if refused:
            log.warning(
                "%s: %s took the mail of %s of %s but refused %s",
                self.server.said.section,
                self.server.said.server,
                message.transition.kind,
                message.transition.event_id,
                refused_some(refused.items(), self.server.said),
            )
        return mail.receipt

    def close(self) -> None:
        """Nothing stays open between sends."""
