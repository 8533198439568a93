"""Teams sink: one card per transition through a Workflows webhook (or a MessageCard connector).

Adaptive (the default): POST the card in a message envelope; Workflows answers 202
before its flow runs. MessageCard: pymsteams builds it, the sink posts it; a
connector answers 200 with the body "1". One attempt per `send()` (the dispatcher
retries), over sebridge's HTTP client (kernel/http_client.py). Teams keeps nothing
we can read back, so a retry after a lost answer may repeat one card
(docs/how-it-works.md: delivery guarantees). Proxies come from the usual environment
variables. The URL is never logged: urllib3's log lines are scrubbed of it. `timeout`
bounds the whole post, connect to the answer's last byte (kernel/deadline.py): a
webhook that drips its answer holds the sink no longer.
"""

from __future__ import annotations

import json
from typing import Any

from sebridge.integrations.render import Renderer
from sebridge.integrations.teams.card import ADAPTIVE_TYPE, PAGE_LINK, CardBuilder
from sebridge.integrations.teams.errors import answer_error, transport_error
from sebridge.integrations.teams.settings import ADAPTIVE
from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.errors import PermanentDeliveryError
from sebridge.kernel.http_client import Answer, HttpClient, NoAnswer
from sebridge.model import Receipt
from sebridge.model.message import Message, shown

__all__ = ["TeamsSink"]

CONNECT_TIMEOUT = 5.0
_JSON = {"Content-Type": "application/json"}
_READ = 64 * 1024  # bytes of an answer taken: a few are expected ("1", a JSON error)


class TeamsSink:
    """Posts one card per transition to a Teams channel.

    Args:
        webhook_url: the Workflows or connector URL (a secret).
        format: "adaptive" (Workflows) or "messagecard" (connector, through pymsteams).
        timeout: seconds to wait for Teams' answer.
    """

    def __init__(
        self,
        webhook_url: str,
        renderer: Renderer,
        *,
        format: str = ADAPTIVE,
        timeout: float = 15.0,
        clock: Clock = utcnow,
    ) -> None:
        self._url = webhook_url
        self._format = format
        self._timeout = timeout
        self.cards = CardBuilder(renderer, clock)
        self._http = HttpClient(
            timeout=timeout, connect_timeout=CONNECT_TIMEOUT, secret_urls=[webhook_url]
        )

    def check_templates(self) -> None:
        """Render every template against sample messages; a broken one raises now."""
        self.cards.check_templates()

    def send(self, message: Message) -> Receipt | None:
        """Post this transition's card. Raises RetryableDeliveryError or PermanentDeliveryError."""
        message = shown(message)  # IMDS's text safe to show, each field within its limit
        if self._format == ADAPTIVE:
            self._post_adaptive(self.cards.adaptive(message))
        else:
            if message.approvable and message.approve_url:
                link = ("Approve…", message.approve_url)
            elif message.page_url:  # held: the page's ways out and Approve anyway
                link = (PAGE_LINK, message.page_url)
            else:
                link = None
            self._post_messagecard(self.cards.messagecard(message), link)
        return None

    def post_text(self, title: str, text: str) -> int:
        """Post a card of a title and a line, no event (`sebridge check --send-test`); the
        HTTP status. Raises as `send` does."""
        if self._format != ADAPTIVE:
            return self._post_messagecard({"title": title, "summary": title, "text": text}, None)
        card = {
            "type": "AdaptiveCard",
            "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
            "version": "1.5",
            "body": [
                {"type": "TextBlock", "text": title, "weight": "Bolder", "wrap": True},
                {"type": "TextBlock", "text": text, "wrap": True},
            ],
        }
        return self._post_adaptive(
            {
                "type": "message",
                "attachments": [
                    {"contentType": ADAPTIVE_TYPE, "contentUrl": None, "content": card}
                ],
            }
        )

    def close(self) -> None:
        """Close the kept-alive connection and stop scrubbing the logs."""
        self._http.close()

    def _post(self, payload: dict[str, Any]) -> Answer:
        body = json.dumps(payload).encode()
        try:
            return self._http.request(
                "POST", self._url, body=body, headers=_JSON, limit=_READ, excerpt=True
            )
        except NoAnswer as exc:
            raise transport_error(exc, self._timeout) from None

    def _post_adaptive(self, payload: dict[str, Any]) -> int:
        response = self._post(payload)
        error = answer_error(
            response.status, response.text, response.headers, url=self._url, what="Adaptive Card"
        )
        if error is not None:
            raise error
        return response.status

    def _post_messagecard(self, fields: dict[str, Any], link: tuple[str, str] | None) -> int:
        """link: the action's title and URL (Approve…, or the held event's page), if any."""
        import pymsteams  # only for this format: an Adaptive Card needs no library

        card = pymsteams.connectorcard(self._url)  # builds the card; the sink posts it
        card.title(str(fields.get("title") or ""))
        card.summary(str(fields.get("summary") or ""))
        card.text(str(fields.get("text") or ""))
        card.color(str(fields.get("color") or "0078D7"))
        facts = fields.get("facts") or []
        if facts:
            section = pymsteams.cardsection()
            for name, value in facts:
                section.addFact(str(name), str(value))
            card.addSection(section)
        if link:
            title, url = link
            action = pymsteams.potentialaction(title, "OpenUri")
            action.addOpenURI(title, [{"os": "default", "uri": url}])
            card.addPotentialAction(action)
        response = self._post(card.payload)
        status = response.status
        # A connector answers 2xx even when it did not post: only its "1" says it did.
        refused = 200 <= status <= 299 and response.text.strip() != "1"
        error = answer_error(
            400 if refused else status,
            response.text,
            response.headers,
            url=self._url,
            what="MessageCard",
        )
        if error is None:
            return status
        if refused and isinstance(error, PermanentDeliveryError):
            raise PermanentDeliveryError(
                f"{error} (the connector answered {status} without posting)"
            )
        raise error
