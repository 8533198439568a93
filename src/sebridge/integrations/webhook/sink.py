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

One attempt per `send()` (the dispatcher retries), over sebridge's HTTP client
(kernel/http_client.py): urllib3's log lines never show the URL (a secret); redirects
are not followed. Proxies come from the usual environment variables. `timeout` bounds
the whole attempt, connect to the answer's last byte read (kernel/deadline.py): a
receiver that drips its answer holds the sink no longer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

from standardwebhooks import Webhook as Signer

from sebridge.integrations.webhook.body import JSON, Body
from sebridge.integrations.webhook.errors import Scrubber, answer_error, transport_error
from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.http_client import HttpClient, NoAnswer
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
        self._http = HttpClient(timeout=timeout, secret_urls=[url])

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
            **self._headers,  # may set Content-Type (a form, a text body)
            "webhook-id": msg_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": signature,
        }
        try:
            # The URL was checked when the config was read: https, or http to this host.
            answer = self._http.request(
                "POST",
                self._url,
                body=body.encode(),
                headers=headers,
                limit=ANSWER_READ,
                excerpt=True,
            )
        except NoAnswer as exc:
            raise transport_error(self._name, exc, self._scrub, self._timeout) from None
        error = answer_error(self._name, answer.status, answer.text, answer.headers, self._scrub)
        if error is not None:
            raise error
        return answer.status

    def close(self) -> None:
        """Close the kept-alive connection."""
        self._http.close()
