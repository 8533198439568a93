"""A small client of the Kubernetes API: the few calls the sink makes, with the pod's token.

HTTPS to the API server, its certificate checked against the service account's CA,
`Authorization: Bearer` with the service account's token (read again for every
request: the kubelet rotates it). Not the official `kubernetes` package: it is
about 30 MB and slow to import, and the VM agent never loads this module (it is
imported only when `[kubernetes]` is on). One attempt per call; the sink decides
what an answer means (409 is not always an error). No message carries the token.
Over sebridge's HTTP client (kernel/http_client.py), never through a proxy (an
in-cluster call). `timeout` bounds each whole call, connect to the answer's last byte
(kernel/deadline.py): an API server (or a proxy before it) that drips its
answer holds the sink no longer.
"""

from __future__ import annotations

import json
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sebridge.kernel import redact
from sebridge.kernel.delivery_status import UNANSWERED, StatusRules
from sebridge.kernel.errors import DeliveryError, PermanentDeliveryError, RetryableDeliveryError
from sebridge.kernel.http_client import HttpClient, NoAnswer, TimedOut
from sebridge.kernel.text import clip

__all__ = ["RULES", "Answer", "KubeApi"]

# The API server sends Retry-After with its 429s (API Priority and Fairness); without one, 1 s.
RULES = StatusRules(default_wait=1.0, cap=600.0)
CONNECT_TIMEOUT = 5.0
_SHOWN = 300  # characters of the API server's message worth quoting

MERGE_PATCH = "application/strategic-merge-patch+json"

_FIXES = {
    401: "the service account token was refused (HTTP 401): is kubernetes.token_file the"
    " pod's token, and the pod's service account still there?",
    403: "forbidden (HTTP 403): the service account may not {what}; deploy/kubernetes/rbac.yaml"
    " grants what sebridge calls (apply it again)",
    404: "not found (HTTP 404) for {what}",
}


@dataclass(frozen=True)
class Answer:
    """The API server's answer: its status, its JSON body (None when not JSON), its headers."""

    status: int
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return 200 <= self.status <= 299

    @property
    def reason(self) -> str:
        """The Status object's reason ("AlreadyExists", "Conflict"), or ""."""
        return str(self.body.get("reason") or "") if isinstance(self.body, dict) else ""


class KubeApi:
    """Calls to one API server as the pod's service account.

    Args:
        server: https://host:port (no path).
        token_file: the service account token (read at each request).
        ca_file: the CA that signed the API server's certificate.
        timeout: seconds to wait for an answer.
    """

    def __init__(self, server: str, token_file: str, ca_file: str, timeout: float) -> None:
        self.server = server
        self._token_file = token_file
        self._ca_file = ca_file
        self._timeout = timeout
        self._token = ""  # the last token read, scrubbed from anything quoted
        self._http = HttpClient(
            timeout=timeout, connect_timeout=CONNECT_TIMEOUT, proxies=False, ca_file=ca_file
        )

    def call(
        self, method: str, path: str, body: Any = None, *, content_type: str = "application/json"
    ) -> Answer:
        """One request. Raises RetryableDeliveryError when no answer came (or the token
        cannot be read); any answer is returned, whatever its status."""
        headers = {"Authorization": f"Bearer {self._read_token()}", "Accept": "application/json"}
        if not os.path.isfile(self._ca_file):  # else a TLS failure, said as one
            raise RetryableDeliveryError(
                f"kubernetes: the CA file {self._ca_file} (kubernetes.ca_file) is missing"
            )
        data = None
        if body is not None:
            data = json.dumps(body, separators=(",", ":")).encode()
            headers["Content-Type"] = content_type
        try:
            response = self._http.request(method, self.server + path, body=data, headers=headers)
        except NoAnswer as exc:
            raise self._unanswered(exc) from None
        try:
            parsed = json.loads(response.body)
        except ValueError:
            parsed = None
        return Answer(response.status, parsed, response.headers)

    def _unanswered(self, exc: NoAnswer) -> DeliveryError:
        if exc.sent and isinstance(exc, TimedOut):
            return UNANSWERED.error(
                f"kubernetes: the API server {self.server} did not answer within"
                f" {self._timeout:g} s (kubernetes.timeout); will retry"
            )
        if isinstance(exc.cause, ssl.SSLError):
            return UNANSWERED.error(
                f"kubernetes: {self.server}'s certificate is not signed by kubernetes.ca_file"
                f" ({self._ca_file}), or TLS failed; will retry"
            )
        return UNANSWERED.error(
            f"kubernetes: cannot reach the API server {self.server}"
            f" ({type(exc.cause).__name__}); will retry"
        )

    def error(self, answer: Answer, what: str) -> DeliveryError:
        """The error for an answer that is not a success: retried or not by the one
        status mapping; `what` says the call ("create Events in default")."""
        failure = RULES.failure(answer.status, answer.headers)
        if failure is None:  # a 2xx the caller did not expect
            return PermanentDeliveryError(f"kubernetes: {what}: unexpected HTTP {answer.status}")
        said = ""
        if isinstance(answer.body, dict) and answer.body.get("message"):
            said = clip(
                redact.scrub(" ".join(str(answer.body["message"]).split()), self._secrets()), _SHOWN
            )
        if failure.retry:
            return failure.error(
                f"kubernetes: {what}: the API server answered HTTP {answer.status}; will retry"
            )
        text = _FIXES.get(answer.status, "HTTP {status} for {what}").format(
            what=what, status=answer.status
        )
        return PermanentDeliveryError(f"kubernetes: {text}" + (f": {said}" if said else ""))

    def close(self) -> None:
        self._http.close()

    def _read_token(self) -> str:
        try:
            with open(self._token_file, encoding="utf-8") as fh:
                token = fh.read().strip()
        except OSError as exc:
            raise RetryableDeliveryError(
                f"kubernetes: cannot read the token {self._token_file}:"
                f" {exc.strerror or type(exc).__name__}"
            ) from None
        if not token:
            raise RetryableDeliveryError(f"kubernetes: the token file {self._token_file} is empty")
        self._token = token
        return token

    def _secrets(self) -> list[str]:
        return [self._token] if self._token else []
