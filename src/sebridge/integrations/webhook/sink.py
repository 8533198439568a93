"""A webhook's sink: one signed POST per transition (Standard Webhooks).

Each delivery carries `webhook-id`, `webhook-timestamp` and `webhook-signature`
(`v1,` and the base64 HMAC-SHA256 of "id.timestamp.body", one per signing key,
separated by spaces, during a key rotation), made by the `standardwebhooks`
package. The id is derived from the transition (delivery_id), so every retry of
one transition, in this process or after a restart, on this agent or another,
carries the same id: the receiver's idempotency key. Delivery is at least once
(an answer lost after the receiver took the body means the body comes again
under the same id). The timestamp is the attempt's own: a receiver refuses one
more than 5 minutes off, and a retry an hour later must still pass.

One attempt per `send()` (the dispatcher retries), with urllib: nothing is
logged on the way, so the URL (a secret) cannot reach a log; redirects are not
followed. Proxies come from the usual environment variables. `timeout` bounds the
whole attempt, connect to the answer's last byte read (integrations/deadline.py):
a receiver that drips its answer holds the sink no longer.
"""

from __future__ import annotations

import hashlib
import http.client
import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from email.message import Message as HeaderMessage
from typing import Any

from standardwebhooks import Webhook as Signer

from sebridge import __version__
from sebridge.integrations.deadline import Deadline
from sebridge.integrations.webhook.body import JSON, Body
from sebridge.integrations.webhook.errors import Scrubber, answer_error, transport_error
from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.delivery_status import NO_ANSWER
from sebridge.model import Receipt
from sebridge.model.message import Message

__all__ = ["ANSWER_READ", "WebhookSink", "delivery_id"]

ANSWER_READ = 4096  # bytes of an answer read: enough to quote, bounded whatever it sends


def delivery_id(name: str, message: Message) -> str:
    """The transition's `webhook-id`: the same on every attempt, from any agent. The store's
    transition id alone could repeat after a store is recreated (a receiver would then drop
    a new event's delivery as a duplicate); with the event, kind and time it cannot."""
    t = message.transition
    key = "\n".join((name, str(message.transition_id), t.event.event_id, t.kind, t.at.isoformat()))
    return "msg_" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A 3xx comes back as the answer (an HTTPError), never followed."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class _Connections:
    """The connections an opener made, so a deadline can reach their socket: urllib's
    handlers take any callable as the connection class."""

    def __init__(self) -> None:
        self.made: list[http.client.HTTPConnection] = []

    def of(self, kind: type[http.client.HTTPConnection]) -> Callable[..., Any]:
        def make(host: str, **kwargs: Any) -> http.client.HTTPConnection:
            connection = kind(host, **kwargs)
            self.made.append(connection)
            return connection

        return make

    def socket(self) -> socket.socket | None:
        sock = self.made[-1].sock if self.made else None
        return sock if isinstance(sock, socket.socket) else None


class _WatchedHttp(urllib.request.HTTPHandler):
    def __init__(self, connections: _Connections) -> None:
        super().__init__()
        self._connections = connections

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connections.of(http.client.HTTPConnection), req)


class _WatchedHttps(urllib.request.HTTPSHandler):
    def __init__(self, connections: _Connections, context: ssl.SSLContext) -> None:
        super().__init__(context=context)
        self._connections = connections
        self._tls = context

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        kind = http.client.HTTPSConnection
        return self.do_open(self._connections.of(kind), req, context=self._tls)


class WebhookSink:
    """POSTs each transition's body to a webhook, signed.

    Args:
        name: the section's name (in errors).
        url: the webhook URL (a secret).
        keys: the `whsec_` signing keys, newest first.
        headers: extra headers (their values may be secrets).
        timeout: seconds to wait for the answer.
    """

    def __init__(
        self,
        name: str,
        url: str,
        keys: Sequence[str],
        body: Body,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 10.0,
        secrets: Sequence[str] = (),
        clock: Clock = utcnow,
    ) -> None:
        self._name = name
        self._url = url
        self._signers = [Signer(key) for key in keys]
        self.body = body
        self._headers = dict(headers or {})
        self._timeout = timeout
        self._clock = clock
        self._scrub = Scrubber(url, [*keys, *self._headers.values(), *secrets])
        self._tls = ssl.create_default_context()

    def check_templates(self) -> None:
        """Render the body of every sample message: a broken template raises now."""
        self.body.check()

    def send(self, message: Message) -> Receipt | None:
        """POST this transition's body, unless its template rendered nothing. Raises
        RetryableDeliveryError or PermanentDeliveryError."""
        body = self.body.render(message)
        if body:
            self.post(delivery_id(self._name, message), body)
        return None

    def post(self, msg_id: str, body: str) -> int:
        """One signed POST; the HTTP status. Raises as `send` does."""
        now = self._clock()
        signature = " ".join(signer.sign(msg_id, now, body) for signer in self._signers)
        headers = {
            "Content-Type": JSON,
            "User-Agent": f"sebridge/{__version__}",
            **self._headers,  # may set Content-Type (a form, a text body)
            "webhook-id": msg_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": signature,
        }
        # The URL was checked when the config was read: https, or http to this host.
        request = urllib.request.Request(self._url, body.encode(), headers, method="POST")  # noqa: S310
        connections = _Connections()
        opener = urllib.request.build_opener(
            _NoRedirect(), _WatchedHttp(connections), _WatchedHttps(connections, self._tls)
        )
        with Deadline(self._timeout, connections.socket) as deadline:
            try:
                with opener.open(request, timeout=self._timeout) as answer:
                    answer.read(ANSWER_READ)
                    return int(answer.status)
            except urllib.error.HTTPError as exc:  # answered, but not with a 2xx
                status = exc.code
                error = answer_error(self._name, status, _read(exc), _headers(exc), self._scrub)
                exc.close()
            except NO_ANSWER as exc:
                # The deadline cut a dripping answer short: it did not answer in time.
                cause = TimeoutError() if deadline.expired else exc
                raise transport_error(self._name, cause, self._scrub, self._timeout) from None
        if error is None:  # a 2xx urllib took for an error (none does today)
            return status
        raise error from None

    def close(self) -> None:
        """Nothing held open between posts."""


def _read(exc: urllib.error.HTTPError) -> str:
    try:
        return exc.read(ANSWER_READ).decode("utf-8", "replace")
    except (OSError, ValueError):  # the answer was cut short: no excerpt
        return ""


def _headers(exc: urllib.error.HTTPError) -> Mapping[str, str]:
    found: HeaderMessage | None = exc.headers
    return dict(found.items()) if found is not None else {}
