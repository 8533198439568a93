"""A transition as a mail: subject, a text and an HTML part, and the event's thread headers.

The parts come from the email/ templates: `text.j2` (plain text) and
`message.html` (HTML, autoescaped by Jinja: IMDS text cannot add markup),
the subject from `subject.j2` ("Reboot of web1, web2 at 08:14 UTC: approval
asked"), on one line. One thread per event: each mail's Message-ID is derived
from its transition (the same on every retry of one delivery, another for
every transition; the domain is the sender's); the event's first mail gives
its Message-ID and subject as the sink's receipt, and every later mail is
"Re: <that subject>" with `In-Reply-To` and `References` naming it, so a
follow-up threads under the first even after NotBefore moved.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import format_datetime

from sebridge.integrations.render import Renderer
from sebridge.integrations.samples import sample_messages
from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.text import clip
from sebridge.model import Receipt, TransitionKind
from sebridge.model.message import Message

__all__ = ["HTML", "SUBJECT", "TEXT", "Mail", "MailBuilder", "message_id", "samples"]

SUBJECT = "email/subject.j2"
TEXT = "email/text.j2"
HTML = "email/message.html"
SUBJECT_LIMIT = 200  # characters: a subject line people can read, folded by the policy
_FULL = frozenset({TransitionKind.SCHEDULED, TransitionKind.UNPLANNED, TransitionKind.CHANGED})
_SUBJECT_KEY = "subject"


@dataclass(frozen=True)
class Mail:
    """A mail ready to send, and the receipt it leaves when it starts its event's thread."""

    message: EmailMessage
    receipt: Receipt | None


def message_id(message: Message, domain: str, section: str) -> str:
    """The mail's Message-ID: the same for every attempt at one transition's delivery (the
    stored transition: its id, kind and time), another for each transition and for each
    section mailing it (two sections' mails to one person are two mails); ASCII whatever
    IMDS sent (digests)."""
    t = message.transition
    event = _digest(t.event_id)[:16]
    seen = f"{section}\n{t.event_id}\n{message.transition_id}\n{t.kind}\n{t.at.isoformat()}"
    return f"<sebridge.{event}.{_digest(seen)[:24]}@{domain}>"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class MailBuilder:
    """Renders messages into mails with the email/ templates.

    Args:
        sender: the From header ("sebridge <sebridge@example.com>").
        to: the To header's addresses.
        domain: the right-hand side of Message-IDs (the sender's domain).
    """

    def __init__(
        self,
        renderer: Renderer,
        *,
        sender: str,
        to: tuple[str, ...],
        domain: str,
        section: str,
        clock: Clock = utcnow,
    ) -> None:
        self._renderer = renderer
        renderer.add_filters(hhmm=_hhmm, plain=_plain)
        self._sender, self._to, self._domain = sender, to, domain
        self._section = section
        self._clock = clock

    def build(self, message: Message) -> Mail:
        """The mail for `message` (already `shown()`: IMDS text displayable and bounded)."""
        now = self._clock()
        context = self._context(message, now)
        subject, thread = self._subject(message, context)
        mail = EmailMessage(policy=SMTP)
        mail["From"] = self._sender
        mail["To"] = ", ".join(self._to)
        mail["Date"] = format_datetime(now)
        own = message_id(message, self._domain, self._section)
        mail["Message-ID"] = own
        if thread is not None:
            mail["Subject"] = "Re: " + thread.data.get(_SUBJECT_KEY, subject)
            mail["In-Reply-To"] = thread.external_id
            mail["References"] = thread.external_id
        else:
            mail["Subject"] = subject
        mail["Auto-Submitted"] = "auto-generated"  # RFC 3834: no vacation replies to it
        mail.set_content(self._render(TEXT, context))
        mail.add_alternative(self._render(HTML, context), subtype="html")
        started = None if thread is not None else Receipt(own, {_SUBJECT_KEY: subject})
        return Mail(mail, started)

    def check_templates(self) -> None:
        """Render every template against sample messages now; a failure names the template."""
        for sample in samples():
            self.build(sample)

    def _subject(self, message: Message, context: dict[str, object]) -> tuple[str, Receipt | None]:
        """This transition's own subject (one line), and the thread it continues, if any."""
        line = " ".join(self._render(SUBJECT, context).split())
        thread = message.receipt if message.receipt and message.receipt.external_id else None
        return clip(line, SUBJECT_LIMIT), thread

    def _render(self, name: str, context: dict[str, object]) -> str:
        return self._renderer.render_for(self._section, name, **context)

    def _context(self, message: Message, now: datetime) -> dict[str, object]:
        t = message.transition
        return {
            "t": t,
            "e": t.event,
            "vm": message.vm_name,
            "policy": message.policy,
            "dry_run": message.dry_run,
            "approvable": message.approvable,
            "approve_url": message.approve_url if message.approvable else None,
            "page_url": message.page_url,
            "approved_by": message.approved_by,
            "anyway_approved": message.decider[2],
            "first": t.kind in _FULL,
            "now": now,
            "readiness": message.readiness,
            "prepare": message.prepare,
            "rule": message.rule,
            "decided": message.decided,
            "held": message.held,
            "next": message.outlook(now),
        }


def _hhmm(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%H:%M")


def _plain(value: object) -> str:
    """A macro's output as plain text, for the HTML template to escape: called from an
    autoescaped template, a macro of a plain one returns its text marked safe."""
    return str(value)


def samples(vm: str = "vm1") -> list[Message]:
    """The core's sample messages with HTML to escape (template checks, rendering tests)."""
    description = 'Host <b>update</b> <script>alert("x")</script> & <a href="http://x">link</a>'
    return sample_messages(vm, description=description)
