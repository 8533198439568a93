"""The fleet page's two secrets made from the link key: the calendar's token and CSRF tokens.

Calendar apps cannot sign in, so the feed's URL carries its own key: an HMAC of
the link key (`[http] link_secret`, or the one generated into the store: a
fleet shares it), under a purpose of its own, so it opens nothing else; it is
compared in constant time. A form of the page carries a CSRF token bound to the
person the proxy named and to an expiry: another site cannot make a signed-in
browser post one, nor can one person's token act for another. See
docs/fleet-page.md.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import timedelta

from sebridge.kernel.clock import Clock, utcnow

__all__ = ["CSRF_FOR", "FleetTokens"]

_CALENDAR = b"sebridge fleet calendar v1\n"
_CSRF = b"sebridge fleet csrf v1\n"
CSRF_FOR = timedelta(hours=12)  # a page left open overnight still approves in the morning


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


class FleetTokens:
    """Makes and checks the calendar's token and the forms' CSRF tokens under one key."""

    def __init__(self, key: str, clock: Clock = utcnow) -> None:
        if not key:
            raise ValueError("the link key must not be empty")
        self._key = key.encode("utf-8")
        self._clock = clock

    def __repr__(self) -> str:
        return "FleetTokens(key=***)"

    def _mac(self, domain: bytes, payload: bytes) -> str:
        return _b64(hmac.new(self._key, domain + payload, hashlib.sha256).digest())

    @property
    def calendar(self) -> str:
        """The calendar feed's token: `/calendar/<token>.ics`."""
        return self._mac(_CALENDAR, b"")

    def calendar_ok(self, token: str) -> bool:
        """Whether `token` is the calendar's (constant time)."""
        return hmac.compare_digest(token.encode("utf-8", "replace"), self.calendar.encode())

    def csrf(self, person: str) -> str:
        """A token for `person`'s forms, valid for CSRF_FOR."""
        expires = int((self._clock() + CSRF_FOR).timestamp())
        return f"{expires}.{self._mac(_CSRF, _csrf_payload(expires, person))}"

    def csrf_ok(self, person: str, token: str) -> bool:
        """Whether `token` was made for `person` and has not expired (constant time)."""
        expires, _, mac = token.partition(".")
        if not expires.isdigit() or len(expires) > 12:
            return False
        made = self._mac(_CSRF, _csrf_payload(int(expires), person))
        fresh = int(expires) >= int(self._clock().timestamp())
        return hmac.compare_digest(mac.encode("utf-8", "replace"), made.encode()) and fresh


def _csrf_payload(expires: int, person: str) -> bytes:
    return f"{expires}\n{person}".encode("utf-8", "surrogatepass")
