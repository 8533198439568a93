"""Signed approval links: `{public_url}/approve/{token}`, carried by any sink (Teams, Jira, e-mail).

A token binds an event id and an expiry with HMAC-SHA256 under the link key
(`[http] link_secret`, or one generated on first start and kept in the
store, so a fleet sharing a store shares the key). The expiry is the
event's NotBefore, or `UNKNOWN_EXPIRY` after the link was made when
NotBefore is unknown. Tokens are URL-safe base64 without padding, and only
that spelling is accepted (base64 decoders also take padding, the standard
alphabet, stray characters and other spellings of the same bytes: one link
must be one string). The MAC is compared in constant time. Single use is
not the token's business: an approval is stored once, so a second use finds
it and sends nothing.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.errors import ApprovalError
from sebridge.model import ScheduledEvent

__all__ = [
    "LINK_KEY_SETTING",
    "UNKNOWN_EXPIRY",
    "LinkError",
    "LinkSigner",
    "approval_link",
    "new_link_key",
]

# The store setting that holds a generated key (never a configured one).
LINK_KEY_SETTING = "link_secret"
# A link for an event whose NotBefore we cannot read stays valid this long.
UNKNOWN_EXPIRY = timedelta(hours=1)
# Binds the MAC to its purpose: the same key must never sign something else usable here.
_DOMAIN = b"sebridge approval link v1\n"
_MAC_BYTES = 32
_MAX_TOKEN = 512  # event ids are GUIDs; anything much longer is not ours
# The one spelling we emit: two unpadded URL-safe base64 parts.
_TOKEN = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")


class LinkError(ApprovalError):
    """A token that is malformed, tampered with or expired (callers show no detail)."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    """The bytes of a part we emitted; ValueError for any other spelling (unused low bits
    set in the last character would decode to the same bytes)."""
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(data) != text:
        raise ValueError("not the canonical encoding")
    return data


def new_link_key() -> str:
    """A fresh random link key (256 bits, URL-safe text)."""
    return secrets.token_urlsafe(32)


class LinkSigner:
    """Makes and checks approval tokens under one key.

    Args:
        key: the link key (configured or generated); never logged.
        clock: now, in UTC (tests pass their own).
    """

    def __init__(self, key: str, clock: Clock = utcnow) -> None:
        if not key:
            raise ValueError("an approval link key must not be empty")
        self._key = key.encode("utf-8")
        self._clock = clock

    def __repr__(self) -> str:
        return "LinkSigner(key=***)"

    def token(self, event_id: str, expires: datetime) -> str:
        """The token for approving `event_id` until `expires`."""
        # surrogatepass: never raises, whatever text an id holds (imds/parse.py skips ids
        # with lone surrogates, but a link must not be what stops a delivery).
        payload = f"{event_id}\n{int(expires.timestamp())}".encode("utf-8", "surrogatepass")
        return f"{_b64(payload)}.{_b64(self._mac(payload))}"

    def token_for(self, event: ScheduledEvent) -> str:
        """The token for an event, expiring at its NotBefore (or UNKNOWN_EXPIRY from now)."""
        return self.token(event.event_id, event.not_before or self._clock() + UNKNOWN_EXPIRY)

    def verify(self, token: str) -> str:
        """The event id a valid, unexpired token names. Raises LinkError otherwise."""
        if len(token) > _MAX_TOKEN or not _TOKEN.fullmatch(token):
            raise LinkError("malformed approval link")
        body, mac = token.split(".")
        try:
            payload, given = _unb64(body), _unb64(mac)
        except (binascii.Error, ValueError):
            raise LinkError("malformed approval link") from None
        if not hmac.compare_digest(given, self._mac(payload)):
            raise LinkError("approval link signature does not match")
        event_id, _, expiry = payload.decode("utf-8", "surrogatepass").rpartition("\n")
        if not event_id or not expiry.isdigit():
            raise LinkError("malformed approval link")
        if self._clock() > datetime.fromtimestamp(int(expiry), UTC):
            raise LinkError("approval link expired")
        return event_id

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._key, _DOMAIN + payload, hashlib.sha256).digest()[:_MAC_BYTES]


def approval_link(public_url: str, signer: LinkSigner) -> Callable[[ScheduledEvent], str]:
    """A function giving each event's approval URL under `public_url` (no trailing "/")."""

    def url(event: ScheduledEvent) -> str:
        return f"{public_url}/approve/{signer.token_for(event)}"

    return url
