"""E-mail's rig: a real SMTP server (aiosmtpd) with STARTTLS, a certificate trusted through
ca_file, and AUTH; hostile text arrives displayable in the text part and escaped in HTML.

SMTP has no HTTP status: the contract's answers are its SMTP equivalents. 401/403 refuse
the sign-in (535), other 4xx refuse the mail (554), 408/429/5xx defer it (451). SMTP has no
Retry-After either: a deferral waits the dispatcher's back-off.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from fakes.smtp import FakeSmtp
from helpers import free_port
from rigs.base import Rig, assert_displayable, registered
from sebridge.integrations.email import Email
from sebridge.model.message import Message

USER, PASSWORD = "sebridge-bot", "pa55-Word-of-the-rig"


def _words(header: str) -> str:
    """A header's text as a mail client compares it: folding may leave a double space."""
    return " ".join(str(header).split())


class EmailRig(Rig):
    integration = registered(Email)
    throttles: ClassVar[Mapping[int, float]] = {}
    no_retry_after = "SMTP replies carry no Retry-After: a deferral waits the back-off"

    def __init__(self) -> None:
        super().__init__()
        self.fake = FakeSmtp(users={USER: PASSWORD})

    def section(self) -> dict[str, Any]:
        return {
            "host": "127.0.0.1",
            "port": self.fake.port,
            "ca_file": str(self.fake.cert.cert),
            "username": USER,
            "password": PASSWORD,
            "from": "sebridge <sebridge@example.com>",
            "to": ["ops@example.com", "Duty <duty@example.com>"],
        }

    def port(self) -> int:
        return self.fake.port

    def unreachable(self) -> dict[str, Any]:
        return {**self.section(), "port": free_port()}

    def answer(self, status: int, retry_after: int | None = None) -> None:
        echo = f"{PASSWORD} {base64.b64encode(PASSWORD.encode()).decode()}"
        if status in (401, 403):
            self.fake.refuse_next_login()
        elif status in (408, 429) or status >= 500:
            self.fake.answer_next(f"451 4.3.0 try again later ({echo})")
        else:
            self.fake.answer_next(f"554 5.6.0 message refused ({echo})")

    def hang(self) -> None:
        self._held(self.fake.hold_next())

    def secrets(self) -> list[str]:
        plain = base64.b64encode(f"\0{USER}\0{PASSWORD}".encode()).decode()
        return [PASSWORD, base64.b64encode(PASSWORD.encode()).decode(), plain]

    def delivered(self) -> int:
        return len(self.fake.mails)

    def check_arrived(self, sent: Sequence[Message]) -> None:
        mails = self.fake.mails
        assert len(mails) == len(sent)
        assert all(m.tls and m.user == USER for m in mails)
        first, *later = mails
        for mail in later:  # one thread: each follow-up answers the event's first mail
            assert mail.message["In-Reply-To"] == first.message["Message-ID"]
            assert mail.message["References"] == first.message["Message-ID"]
            assert _words(mail.message["Subject"]) == _words("Re: " + first.message["Subject"])
        for mail in mails:
            subject = str(mail.message["Subject"])
            assert "\n" not in subject and "\r" not in subject and len(subject) <= 210
            assert_displayable([subject, mail.part("plain")])
            # HTML: IMDS's text escaped by Jinja, never markup of its own.
            assert_displayable([mail.part("html")], markup=("<!channel>", "<@U0123ABCD>"))
            assert "&lt;!channel&gt;" in mail.part("html") or "<!channel>" not in str(sent)
