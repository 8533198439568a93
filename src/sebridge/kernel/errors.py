"""The exception tree. Every error sebridge raises on purpose is a BridgeError.

    BridgeError
     ├── ConfigError                  bad configuration; names the key
     ├── ImdsError                    anything that went wrong talking to IMDS
     │    ├── ImdsRequestError        400: our request is wrong (a bug); not retried
     │    ├── ImdsThrottledError      429: over IMDS's 5 requests/s; retry later
     │    ├── ImdsUnavailableError    404/410/5xx, timeout, refused, reset; retry
     │    └── MalformedDocumentError  a body that is not JSON (a proxy's page) or
     │                                JSON that is not a Scheduled Events document
     ├── StoreError
     │    └── StoreInUseError         another daemon holds the store (or this agent's name)
     ├── DeliveryError
     │    ├── RetryableDeliveryError  network, 5xx, 429 (with retry_after)
     │    └── PermanentDeliveryError  other 4xx, template errors
     └── ApprovalError                unknown, gone or started event; bad link

Messages say what happened and what a person can do about it, and never
carry a secret.
"""

from __future__ import annotations

__all__ = [
    "ApprovalError",
    "BridgeError",
    "ConfigError",
    "DeliveryError",
    "ImdsError",
    "ImdsRequestError",
    "ImdsThrottledError",
    "ImdsTimeoutError",
    "ImdsUnavailableError",
    "MalformedDocumentError",
    "PermanentDeliveryError",
    "RetryableDeliveryError",
    "StoreError",
    "StoreInUseError",
]


class BridgeError(Exception):
    """Root of every error sebridge raises on purpose."""


class ConfigError(BridgeError):
    """The configuration is invalid; the message names the key."""


class ImdsError(BridgeError):
    """A call to the Instance Metadata Service failed.

    Args:
        status: the HTTP status, when IMDS answered at all.
        retryable: whether the same call may succeed later.
        retry_after: seconds to wait before retrying, when known.
    """

    retryable: bool = True

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class ImdsRequestError(ImdsError):
    """IMDS answered 400: the request was malformed. A bug on our side; not retried."""

    retryable = False


class ImdsThrottledError(ImdsError):
    """IMDS answered 429: more than 5 requests per second from this VM."""


class ImdsUnavailableError(ImdsError):
    """IMDS could not be reached or failed (404, 410, 5xx, timeout, refused, reset)."""


class ImdsTimeoutError(ImdsUnavailableError):
    """IMDS did not answer in time: retryable by the caller, but not inside the same call."""


class MalformedDocumentError(ImdsError):
    """The answer is not a Scheduled Events document: not JSON, or JSON of the wrong shape."""


class StoreError(BridgeError):
    """The state store failed or holds something unexpected."""


class StoreInUseError(StoreError):
    """Another daemon holds the store (SQLite) or this agent's name (PostgreSQL)."""


class DeliveryError(BridgeError):
    """A sink could not deliver a notification.

    Args:
        key: the configuration key a person looks at about it ("jira.url"), when the
            sink knows one: `sebridge check` names it on the problem's line.
    """

    def __init__(self, message: str, *, retry_after: float | None = None, key: str = "") -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.key = key


class RetryableDeliveryError(DeliveryError):
    """The same delivery may succeed later (network, 5xx, 429)."""


class PermanentDeliveryError(DeliveryError):
    """Retrying cannot help (bad credentials, unknown channel, broken template)."""


class ApprovalError(BridgeError):
    """An approval was refused: unknown, gone or started event, or a bad link."""
