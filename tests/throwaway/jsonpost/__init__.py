"""A JSON webhook: one POST per transition.

Written the way docs/ARCHITECTURE.md ("Adding an integration") tells a newcomer to:
this folder is all it brings beside one line in the registry. tests/test_registry.py
copies it into a copy of the package as integrations/jsonpost/ and runs the CLI with it;
tests/test_integration_contract.py runs it through the contract every integration runs.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass

from sebridge.config.secrets import Secret
from sebridge.integrations.base import Context, Integration
from sebridge.kernel.delivery_status import NO_ANSWER, UNANSWERED, StatusRules
from sebridge.kernel.redact import scrub, url_secrets
from sebridge.model import Receipt
from sebridge.model.message import Message, shown

RULES = StatusRules()  # nothing this API does otherwise than HTTP says
_UNSET = Secret()  # immutable: one default serves every instance


@dataclass(frozen=True)
class JsonPostSettings:
    """[jsonpost]: on when url is set; the URL is a secret (it may carry a token)."""

    url: Secret = _UNSET
    timeout: float = 5.0

    @property
    def enabled(self) -> bool:
        return bool(self.url)


class JsonPostSink:
    """POSTs `{"transition": ..., "event_id": ...}` for each transition."""

    def __init__(self, url: str, timeout: float) -> None:
        self._url = url
        self._timeout = timeout

    def send(self, message: Message) -> Receipt | None:
        """One POST; raises as the kernel's mapping says."""
        t = shown(message).transition  # IMDS's text safe to show, each field within its limit
        body = json.dumps({"transition": t.kind, "event_id": t.event_id}).encode()
        request = urllib.request.Request(self._url, body, {"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(request, timeout=self._timeout).close()
        except urllib.error.HTTPError as exc:  # answered, but not with a 2xx
            exc.close()
            failure = RULES.failure(exc.code, dict(exc.headers.items()))
            if failure is not None:
                raise failure.error(f"jsonpost: answered HTTP {exc.code}") from None
        except NO_ANSWER as exc:
            said = scrub(str(exc), url_secrets(self._url))
            raise UNANSWERED.error(f"jsonpost: cannot reach it: {said}") from None
        return None

    def close(self) -> None:
        """Nothing held open between posts."""


class JsonPost(Integration[JsonPostSettings]):
    """The JSON webhook (a throwaway: sebridge's own is integrations/webhook)."""

    name = "jsonpost"
    title = "JSON webhook"
    outbound = True
    settings = JsonPostSettings

    def sink(self, ctx: Context[JsonPostSettings]) -> JsonPostSink:
        return JsonPostSink(ctx.settings.url.reveal(), ctx.settings.timeout)
