"""One SMTP session: connect, EHLO, TLS (verified), sign in; then send, or only say how it went.

TLS always gets `ssl.create_default_context()` (the system's CAs, or
`ca_file`; the host name checked): `starttls()` without a context would
encrypt to anyone and check nothing. The session is opened per delivery and
closed after it: a mail every few minutes keeps no idle connection, which
servers drop after a minute or so anyway. `timeout` bounds the whole session,
connect to QUIT (kernel/deadline.py): a server that drips its banner or
its answers cannot hold the sink longer.
"""

from __future__ import annotations

import smtplib
import socket
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.message import EmailMessage

from sebridge.integrations.email.errors import Said, smtp_error, too_slow
from sebridge.integrations.email.settings import EmailSettings, address
from sebridge.kernel.deadline import Deadline

__all__ = ["Session", "SmtpServer"]


@dataclass
class Session:
    """An open SMTP session, and what opening it found (for `sebridge check`)."""

    smtp: smtplib.SMTP
    banner: str = ""  # the name the server gave in its EHLO answer
    tls: str = ""  # "TLSv1.3, certificate verified for HOST"; "" without TLS
    signed_in: str = ""  # the user name, "" when not signing in


class SmtpServer:
    """The configured SMTP server of one section.

    Args:
        section: the section's name, for the keys errors name.
    """

    def __init__(self, settings: EmailSettings, section: str) -> None:
        self.settings = settings
        s = settings
        self.said = Said(section, f"{s.host}:{s.server_port}", s.username, s.password.reveal())
        self._password = s.password.reveal()
        # EHLO names this host; smtplib's default (socket.getfqdn) may wait on DNS.
        self._local_name = socket.gethostname() or "localhost"
        self._context = ssl.create_default_context(cafile=s.ca_file or None)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """An open, secured, signed-in session, closed after, all within `timeout`. Raises
        the delivery error."""
        smtp = self._client()
        with Deadline(self.settings.timeout, lambda: smtp.sock) as deadline:
            try:
                opened = self._open(smtp)
            except Exception as exc:
                raise self._error(exc, deadline) from None
            try:
                yield opened
            except BaseException as exc:
                opened.smtp.close()  # no QUIT after trouble: a server that hangs would hang it
                if isinstance(exc, smtplib.SMTPException | OSError):
                    raise self._error(exc, deadline) from None
                raise
            _quit(opened.smtp)

    def _error(self, exc: Exception, deadline: Deadline) -> Exception:
        return (
            too_slow(deadline.seconds, self.said)
            if deadline.expired
            else smtp_error(exc, self.said)
        )

    def send(self, mail: EmailMessage) -> dict[str, tuple[int, bytes]]:
        """Send `mail` to every `to` in one session; the recipients refused while others
        took it (none refused: {}). Raises RetryableDeliveryError or PermanentDeliveryError."""
        s = self.settings
        with self.session() as opened:
            return opened.smtp.send_message(
                mail, from_addr=address(s.sender), to_addrs=[address(t) for t in s.to]
            )

    def _client(self) -> smtplib.SMTP:
        """A client not connected yet (connect() gives it the socket the deadline watches)."""
        s = self.settings
        if s.tls:
            return smtplib.SMTP_SSL(
                local_hostname=self._local_name, timeout=s.timeout, context=self._context
            )
        return smtplib.SMTP(local_hostname=self._local_name, timeout=s.timeout)

    def _open(self, smtp: smtplib.SMTP) -> Session:
        s = self.settings
        host = s.host.strip("[]")
        opened = Session(smtp)
        # The name TLS checks the certificate against: Python 3.11's connect() leaves it to
        # the constructor, which would connect before the deadline has a socket to watch.
        smtp._host = host  # type: ignore[attr-defined]
        try:
            code, greeting = smtp.connect(host, s.server_port)
            if code != 220:  # as smtplib's own connect-in-the-constructor says it
                raise smtplib.SMTPConnectError(code, greeting)
            code, banner = smtp.ehlo()
            if not 200 <= code < 300:
                raise smtplib.SMTPHeloError(code, banner)
            opened.banner = banner.decode("utf-8", "replace").splitlines()[0] if banner else ""
            if s.starttls and not s.tls:
                smtp.starttls(context=self._context)
                smtp.ehlo()  # RFC 3207: what the server offers may change under TLS
            if s.encrypted:
                sock = smtp.sock
                version = sock.version() if isinstance(sock, ssl.SSLSocket) else None
                opened.tls = f"{version or 'TLS'}, certificate verified for {host}"
            if s.username:
                smtp.login(s.username, self._password)
                opened.signed_in = s.username
        except BaseException:
            smtp.close()
            raise
        return opened


def _quit(smtp: smtplib.SMTP) -> None:
    """QUIT politely; a server already gone is no error (the mail was taken)."""
    try:
        smtp.quit()
    except (smtplib.SMTPException, OSError):
        smtp.close()
