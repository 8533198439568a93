"""[email]: the section's keys, and the checks that need more than their types.

TLS is on by default and verified: STARTTLS on 587 (or implicit TLS on 465
with `tls = true`), the server's certificate checked against the system's CAs
(or `ca_file`) and against `host`. A password is never sent in the clear: a
section that signs in without TLS is refused unless the server is this host
(a loopback relay). Every key named in a problem is spelt with the section's
own name (`section`), so the same checks serve any instance of it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from sebridge.config.durations import Seconds
from sebridge.config.reader import Reader, option
from sebridge.config.secrets import Secret

__all__ = [
    "IMPLICIT_TLS_PORT",
    "SUBMISSION_PORT",
    "EmailSettings",
    "address",
    "is_loopback",
    "validate",
]

SUBMISSION_PORT = 587  # RFC 6409: message submission, STARTTLS
IMPLICIT_TLS_PORT = 465  # RFC 8314: submission over TLS from the first byte
_UNSET = Secret()
# A host name or an IP address: what smtplib connects to (no scheme, no port, no space).
_HOST = re.compile(r"[A-Za-z0-9._-]+|\[?[0-9A-Fa-f:.]+\]?")
# Keys whose field bears another name.
_FIELD = {"from": "sender"}
Key = Callable[[str], str]  # "from" -> "email.from"


@dataclass(frozen=True)
class EmailSettings:
    """[email]: enabled when host is set."""

    # The SMTP server (a name its certificate is for): e-mail is on when it is set.
    host: str = ""
    # Unset: 587, or 465 with tls.
    port: int | None = option(None, ge=1, le=65535)
    # Upgrade to TLS (STARTTLS) before anything else is sent.
    starttls: bool = True
    # true: TLS from the first byte (implicit TLS, port 465).
    tls: bool = False
    # A PEM file of a private CA to trust; empty: the system's CAs.
    ca_file: str = ""
    # Signs in when set (AUTH PLAIN or LOGIN): a password is only sent over TLS, or to this
    # machine.
    username: str = ""
    # The password, with username.
    password: Secret = _UNSET
    # The sender, e.g. `"sebridge <sebridge@example.com>"`; its domain ends each Message-ID.
    sender: str = option("", key="from")
    # The recipients, e.g. `["ops@example.com", "Duty <duty@example.com>"]`.
    to: tuple[str, ...] = ()
    # Seconds to wait for the server, per connection and reply.
    timeout: Seconds = option(30.0, gt=0.0, le=300.0, why="seconds to wait for the server")

    @property
    def enabled(self) -> bool:
        return bool(self.host)

    @property
    def server_port(self) -> int:
        """The port: as given, else the one the TLS mode uses."""
        return self.port or (IMPLICIT_TLS_PORT if self.tls else SUBMISSION_PORT)

    @property
    def encrypted(self) -> bool:
        """Whether the connection is TLS before anything is sent (implicit or STARTTLS)."""
        return self.tls or self.starttls

    @property
    def mode(self) -> str:
        """How the connection is secured, in a few words for messages."""
        if self.tls:
            return "implicit TLS"
        return "STARTTLS" if self.starttls else "no TLS"

    @property
    def domain(self) -> str:
        """The sender's domain: the right-hand side of every Message-ID sebridge makes."""
        return address(self.sender).rpartition("@")[2]


def address(text: str) -> str:
    """The bare address of "Name <a@b>" or "a@b"."""
    from email.utils import parseaddr  # loaded with [email] only (see _bad_address)

    return parseaddr(text)[1]


def is_loopback(host: str) -> bool:
    """localhost or a loopback address: the mail never leaves this machine."""
    import ipaddress  # loaded with [email] only (see _bad_address)

    name = host.strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def validate(s: EmailSettings, rd: Reader, section: str) -> EmailSettings:
    """The server, the addresses, the sign-in, and TLS before any password (fail closed)."""

    def key(name: str) -> str:
        return f"{section}.{name}"

    if not s.host:
        given = [k for k in ("from", "to", "username") if getattr(s, _FIELD.get(k, k))]
        if given or s.password:
            rd.required(key("host"), f"when [{section}] sets {', '.join(given) or 'password'}")
        return s
    host = s.host.strip()
    if not _HOST.fullmatch(host):
        rd.error(key("host"), f'must be a host name or an IP address, no scheme or port: "{host}"')
    _check_addresses(s, rd, key)
    _check_sign_in(s, rd, key, host)
    _check_ca_file(s, rd, key)
    return replace(s, host=host, port=s.server_port)


def _check_addresses(s: EmailSettings, rd: Reader, name: Key) -> None:
    if not s.sender:
        rd.required(name("from"), "when e-mail is enabled (the host is set)")
    elif (why := _bad_address(s.sender)) is not None:
        rd.error(name("from"), why)
    if not s.to:
        rd.required(name("to"), "when e-mail is enabled: a list of addresses")
    for n, recipient in enumerate(s.to, 1):
        if (why := _bad_address(recipient)) is not None:
            rd.error(f"{name('to')}[{n}]", why)


def _bad_address(text: str) -> str | None:
    """Why `text` is no single mail address ("Name <a@b.example>" or "a@b.example"), or None."""
    if "\r" in text or "\n" in text:
        return "must be one address on one line"
    # Imported only when an address is checked: email.headerregistry and its parser are
    # about 0.3 MiB that a daemon without [email] does not need (tests/test_run_imports.py).
    from email.headerregistry import Address
    from email.utils import getaddresses

    found = getaddresses([text])
    if len(found) != 1 or not found[0][1]:
        return f'must be one address ("ops@example.com" or "Ops <ops@example.com>"): "{text}"'
    try:
        parsed = Address(addr_spec=found[0][1])
    except (ValueError, IndexError) as exc:
        return f'is not a mail address ({exc}), got "{text}"'
    if not parsed.username or not parsed.domain:
        return f'must be user@domain, got "{text}"'
    return None


def _check_sign_in(s: EmailSettings, rd: Reader, name: Key, host: str) -> None:
    if s.username and not s.password:
        rd.required(rd.secret_key(name("password")), f"with {name('username')}")
    elif s.password and not s.username:
        rd.required(name("username"), f"with {name('password')}")
    if s.encrypted or is_loopback(host):
        return
    if s.username:
        rd.error(
            name("username"),
            f"signing in without TLS would send the password in the clear to {host}: set"
            f" {name('starttls')} = true (port 587) or {name('tls')} = true (port 465);"
            " plaintext is allowed only to a loopback relay (localhost)",
        )
    else:
        rd.warnings.append(
            f"{name('starttls')} and {name('tls')} are off: mail to {host} travels unencrypted"
        )


def _check_ca_file(s: EmailSettings, rd: Reader, name: Key) -> None:
    if not s.ca_file:
        return
    if not s.encrypted:
        rd.warnings.append(f"{name('ca_file')} is not used: TLS is off")
        return
    import ssl  # only with e-mail configured: `run` with the console alone never needs it

    try:
        ssl.create_default_context(cafile=s.ca_file)
    except (OSError, ssl.SSLError) as exc:
        rd.error(name("ca_file"), f"cannot be read as PEM certificates: {exc}")
