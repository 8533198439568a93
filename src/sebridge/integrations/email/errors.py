"""What went wrong talking SMTP -> RetryableDeliveryError or PermanentDeliveryError.

SMTP says it in the reply's first digit (RFC 5321): 4xx is transient (try
again later: greylisting, a full queue, a server shutting down), 5xx is
permanent (a refused sender or recipient, a failed sign-in, a message too
large). Connection trouble (refused, reset, timed out, cut) is retried. A
certificate that does not verify is permanent and says why: retrying cannot
make it match. The server's reply is quoted (scrubbed of the password and its
base64 forms, which a careless server might echo), never the password itself.
"""

from __future__ import annotations

import base64
import smtplib
import ssl
from collections.abc import Iterable, Mapping

from sebridge.kernel.errors import DeliveryError, PermanentDeliveryError, RetryableDeliveryError
from sebridge.kernel.redact import scrub

__all__ = ["Said", "refused_some", "smtp_error", "too_slow"]

_SHOWN = 300  # characters of a server's reply worth quoting


class Said:
    """How errors of one section are worded: its name (the keys' prefix), its server, and
    the secrets no text may carry."""

    def __init__(self, section: str, server: str, username: str, password: str) -> None:
        self.section = section
        self.server = server
        self._secrets = _secret_forms(username, password)

    def key(self, name: str) -> str:
        return f"{self.section}.{name}"

    def clean(self, text: str) -> str:
        """`text` on one line, without the password, cut to a readable length."""
        return scrub(" ".join(text.split()), self._secrets)[:_SHOWN]

    def reply(self, code: int, message: bytes | str) -> str:
        text = message.decode("utf-8", "replace") if isinstance(message, bytes) else message
        return self.clean(f"{code} {text}")


def _secret_forms(username: str, password: str) -> list[str]:
    """The password and what AUTH PLAIN and LOGIN send of it (base64), as a reply could echo."""
    if not password:
        return []
    b64 = base64.b64encode
    plain = b64(f"\0{username}\0{password}".encode()).decode()
    return [password, b64(password.encode()).decode(), plain]


def smtp_error(exc: BaseException, said: Said) -> DeliveryError:
    """The delivery error for what smtplib (or the socket, or TLS) raised."""
    if isinstance(exc, smtplib.SMTPException) and not isinstance(
        exc, smtplib.SMTPServerDisconnected
    ):
        return _answer(exc, said)
    if isinstance(exc, ssl.SSLError):
        return _tls(exc, said)
    if isinstance(exc, smtplib.SMTPServerDisconnected | OSError):
        return RetryableDeliveryError(
            f"{said.section}: cannot reach {said.server} ({type(exc).__name__}); will retry"
        )
    raise exc  # a bug of ours: the dispatcher logs it and retries


def too_slow(seconds: float, said: Said) -> DeliveryError:
    """The server took longer than `timeout` for the whole session (a dripped banner or
    answer): retried, as a slow server may be quicker later."""
    return RetryableDeliveryError(
        f"{said.section}: {said.server} did not finish answering within {seconds:g} s"
        f" ({said.key('timeout')} bounds the whole delivery); will retry"
    )


def _answer(exc: smtplib.SMTPException, s: Said) -> DeliveryError:
    """What the server said, by its reply code."""
    if isinstance(exc, smtplib.SMTPAuthenticationError):
        reply = s.reply(exc.smtp_code, exc.smtp_error)
        return PermanentDeliveryError(
            f"{s.section}: {s.server} refused the sign-in ({reply}):"
            f" check {s.key('username')} and {s.key('password')}"
        )
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return _refused(exc.recipients, s)
    if isinstance(exc, smtplib.SMTPResponseException):
        return _coded(exc.smtp_code, s.reply(exc.smtp_code, exc.smtp_error), s)
    return PermanentDeliveryError(f"{s.section}: {_unsupported(str(exc), s)}")


def _tls(exc: ssl.SSLError, s: Said) -> DeliveryError:
    """A certificate that does not verify, or TLS spoken to a port that does not: permanent,
    retrying cannot change either."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return PermanentDeliveryError(
            f"{s.section}: the certificate of {s.server} was refused"
            f" ({s.clean(exc.verify_message or str(exc))}): {s.key('host')} must be a name the"
            f" certificate is for, and its CA trusted (the system's, or {s.key('ca_file')})"
        )
    return PermanentDeliveryError(
        f"{s.section}: TLS with {s.server} failed ({s.clean(exc.reason or str(exc))}):"
        f" {s.key('tls')} = true is for a port that speaks TLS at once (465),"
        f" {s.key('starttls')} for one that starts in plain text (587)"
    )


def _coded(code: int, reply: str, s: Said) -> DeliveryError:
    if 400 <= code < 500 or code < 0:  # -1: smtplib read no reply (the connection broke)
        return RetryableDeliveryError(f"{s.section}: {s.server} answered {reply}; will retry")
    return PermanentDeliveryError(f"{s.section}: {s.server} refused the mail: {reply}")


def _refused(recipients: Mapping[str, tuple[int, bytes]], s: Said) -> DeliveryError:
    """Every recipient refused: retried only when every refusal is transient."""
    said = "; ".join(f"{who}: {s.reply(code, text)}" for who, (code, text) in recipients.items())
    if all(400 <= code < 500 for code, _ in recipients.values()):
        return RetryableDeliveryError(
            f"{s.section}: {s.server} deferred every recipient ({said}); will retry"
        )
    return PermanentDeliveryError(
        f"{s.section}: {s.server} refused every recipient ({said}): check {s.key('to')}"
    )


def _unsupported(text: str, s: Said) -> str:
    if "STARTTLS" in text:
        return (
            f"{s.server} does not offer STARTTLS: set {s.key('tls')} = true if its port speaks"
            f" TLS at once (465); plain text ({s.key('starttls')} = false) is only for a relay"
            " on this host"
        )
    if "AUTH" in text:
        return (
            f"{s.server} offers no sign-in (AUTH) here: remove {s.key('username')} and"
            f" {s.key('password')}, or use the server's submission port"
        )
    return f"{s.server}: {s.clean(text)}"


def refused_some(recipients: Iterable[tuple[str, tuple[int, bytes]]], s: Said) -> str:
    """A line naming the recipients the server refused while it took the mail for others."""
    return "; ".join(f"{who}: {s.reply(code, text)}" for who, (code, text) in recipients)
