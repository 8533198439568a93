"""A real SMTP server on 127.0.0.1 (aiosmtpd), with STARTTLS or implicit TLS and AUTH.

The certificate is made by the `openssl` CLI (`certificate()`): self-signed, for the
names given, so a client that trusts it through `ca_file` verifies it, and one for
another name is refused. `Received` keeps each mail as the server got it (envelope,
parsed message, whether TLS was on and who signed in, when it arrived). The next mail
can be answered with any reply (`answer_next("451 4.3.0 try later")`) or held unanswered
(`hold_next()`), a recipient refused (`refuse_rcpt`); a sign-in is checked against `users` (or refused: `refuse_next_login()`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

__all__ = ["Certificate", "FakeSmtp", "Received", "certificate"]


@dataclass(frozen=True)
class Certificate:
    cert: Path  # PEM: the server's certificate, and the CA a client trusts (self-signed)
    key: Path


_FOLDER = Path(tempfile.mkdtemp(prefix="sebridge-smtp-certs-"))


@functools.cache
def certificate(*names: str) -> Certificate:
    """A self-signed certificate (EC P-256, one day) for DNS names and IP addresses."""
    if shutil.which("openssl") is None:
        raise RuntimeError("the openssl CLI is needed to make the test server's certificate")
    stem = _FOLDER / "-".join(n.replace(":", "_") for n in names)
    cert, key = stem.with_suffix(".crt"), stem.with_suffix(".key")
    alt = ",".join(f"IP:{n}" if n[0].isdigit() else f"DNS:{n}" for n in names)
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt"),
            *("ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert)),
            *("-subj", f"/CN={names[0]}", "-addext", f"subjectAltName={alt}"),
        ],
        check=True,
        capture_output=True,
    )
    return Certificate(cert, key)


@dataclass
class Received:
    """One mail the server took."""

    sender: str
    recipients: list[str]
    message: EmailMessage
    tls: bool
    user: str | None  # who signed in; None without AUTH
    at: float  # time.time() when DATA ended

    def part(self, subtype: str) -> str:
        """The decoded text of the text/<subtype> part."""
        for piece in self.message.walk():
            if piece.get_content_type() == f"text/{subtype}":
                text = str(piece.get_content())  # type: ignore[attr-defined]
                return text.replace("\r\n", "\n")  # SMTP's line ends, not the text's
        raise AssertionError(f"no text/{subtype} part")


class _Handler:
    def __init__(self, fake: FakeSmtp) -> None:
        self.fake = fake

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: Any
    ) -> str:
        refusal = self.fake.refuse_rcpt.get(address)
        if refusal is not None:
            return refusal
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        fake = self.fake
        with fake.lock:
            reply = fake.replies.pop(0) if fake.replies else None
            hold = fake.holds.pop(0) if fake.holds else None
        while hold is not None and not hold.is_set():
            await asyncio.sleep(0.02)
        if reply is not None:
            return reply
        raw = envelope.original_content or envelope.content or b""
        assert isinstance(raw, bytes)
        received = Received(
            sender=str(envelope.mail_from),
            recipients=list(envelope.rcpt_tos),
            message=message_from_bytes(raw, policy=default),  # type: ignore[arg-type]
            tls=_encrypted(server, session),
            user=fake.signed_in.get(id(session)),
            at=time.time(),
        )
        with fake.lock:
            fake.mails.append(received)
        return "250 2.0.0 queued as fake"


def _encrypted(server: SMTP, session: Session) -> bool:
    """TLS under this session: after STARTTLS (session.ssl), or from the first byte."""
    transport = server.transport
    return session.ssl is not None or (
        transport is not None and transport.get_extra_info("ssl_object") is not None
    )


class _Controller(Controller):
    """Binds port 0 and learns the port before aiosmtpd's own start-up check connects."""

    def _trigger_server(self) -> None:
        assert self.server is not None
        self.port = self.server.sockets[0].getsockname()[1]
        super()._trigger_server()


class FakeSmtp:
    """An SMTP server on 127.0.0.1.

    Args:
        tls: "starttls" (offered, and required before AUTH), "implicit" (TLS from the first
            byte), or "none".
        cert: the server's certificate (default: one for 127.0.0.1 and localhost).
        users: user -> password accepted by AUTH PLAIN and LOGIN; None: AUTH not offered.
        mechanisms: the AUTH mechanisms offered (smtplib prefers PLAIN to LOGIN).
    """

    def __init__(
        self,
        tls: str = "starttls",
        cert: Certificate | None = None,
        users: dict[str, str] | None = None,
        mechanisms: tuple[str, ...] = ("PLAIN", "LOGIN"),
    ) -> None:
        self.cert = cert or certificate("127.0.0.1", "localhost")
        self.users = users
        self.mails: list[Received] = []
        self.replies: list[str] = []
        self.holds: list[threading.Event] = []
        self.logins: list[tuple[str, str, bool]] = []  # (mechanism, user, accepted)
        self.signed_in: dict[int, str] = {}
        self.refuse_rcpt: dict[str, str] = {}  # recipient -> the reply refusing it
        self.refuse_logins = 0  # sessions whose sign-ins are refused, whatever the password
        self._refusing: set[int] = set()  # those sessions (smtplib tries every mechanism)
        self.lock = threading.Lock()
        # The server's own log quotes every line it reads and writes (an AUTH's base64, a
        # reply echoing a password): the client's logs are what tests look at.
        logging.getLogger("mail.log").setLevel(logging.ERROR)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert.cert, self.cert.key)
        options: dict[str, Any] = {"server_hostname": "smtp.test", "ready_timeout": 10.0}
        if users is not None:
            options["authenticator"] = self._authenticate
            # aiosmtpd knows only STARTTLS's TLS: under implicit TLS the socket is TLS already.
            options["auth_require_tls"] = tls != "implicit"
            options["auth_exclude_mechanism"] = [
                m for m in ("PLAIN", "LOGIN") if m not in mechanisms
            ]
        if tls == "starttls":
            options.update(tls_context=context, require_starttls=True)
        elif tls == "implicit":
            options["ssl_context"] = context
        self._controller = _Controller(_Handler(self), hostname="127.0.0.1", port=0, **options)

    @property
    def port(self) -> int:
        return int(self._controller.port)

    def __enter__(self) -> FakeSmtp:
        self._controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for hold in self.holds:
            hold.set()
        self._controller.stop()

    def answer_next(self, reply: str) -> None:
        """The next mail's DATA is answered `reply` ("451 4.3.0 try later") and not kept."""
        with self.lock:
            self.replies.append(reply)

    def hold_next(self) -> threading.Event:
        """The next mail's DATA gets no answer until the event is set (or the server stops)."""
        release = threading.Event()
        with self.lock:
            self.holds.append(release)
        return release

    def refuse_next_login(self) -> None:
        """The next session's sign-in is refused (535, every mechanism), as for a revoked
        password."""
        with self.lock:
            self.refuse_logins += 1

    def _authenticate(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        if not isinstance(data, LoginPassword) or self.users is None:
            return AuthResult(success=False, handled=False)
        user, password = data.login.decode(), data.password.decode()
        with self.lock:
            if self.refuse_logins > 0 and id(session) not in self._refusing:
                self.refuse_logins -= 1
                self._refusing.add(id(session))
            refused = id(session) in self._refusing
        accepted = self.users.get(user) == password and not refused
        self.logins.append((mechanism, user, accepted))
        if accepted:
            self.signed_in[id(session)] = user
        return AuthResult(success=accepted, handled=False)
