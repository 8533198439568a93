"""`sebridge check --send-test` for e-mail: one mail that only says what it is."""

from __future__ import annotations

from email.message import EmailMessage
from email.policy import SMTP
from email.utils import format_datetime, make_msgid

from sebridge.integrations.base import Finding, TrialNote
from sebridge.integrations.email.settings import EmailSettings
from sebridge.integrations.email.smtp import SmtpServer
from sebridge.kernel.clock import utcnow
from sebridge.kernel.errors import DeliveryError

__all__ = ["send_trial", "trial_mail"]


def trial_mail(settings: EmailSettings, note: TrialNote) -> EmailMessage:
    """The test mail: From, To, a subject naming the VM, the note as its text."""
    mail = EmailMessage(policy=SMTP)
    mail["From"] = settings.sender
    mail["To"] = ", ".join(settings.to)
    mail["Subject"] = f"sebridge test message from {note.vm_name}"
    mail["Date"] = format_datetime(utcnow())
    mail["Message-ID"] = make_msgid("sebridge-test", domain=settings.domain)
    mail["Auto-Submitted"] = "auto-generated"
    mail.set_content(note.text + "\n")
    return mail


def send_trial(settings: EmailSettings, section: str, note: TrialNote) -> Finding:
    """Send the test mail; the finding says who the server took it for."""
    server = SmtpServer(settings, section)
    try:
        refused = server.send(trial_mail(settings, note))
    except DeliveryError as exc:
        said = str(exc).removeprefix(f"{section}: ").removesuffix("; will retry")
        return Finding(section, False, f"test mail not sent: {said}")
    taken = [t for t in settings.to if t not in refused]
    line = f"test mail taken by {server.said.server} for {', '.join(taken)}"
    if refused:
        return Finding(section, False, f"{line}; refused for {', '.join(refused)}")
    return Finding(section, True, line + ": look in those mailboxes (and their spam folders)")
