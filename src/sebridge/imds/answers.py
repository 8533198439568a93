"""What IMDS answered, as a body or a typed error: the classification of its replies.

IMDS answers 200 with the document, 400 for a request of ours it refuses, 429
when over 5 requests per second, and 404/410/5xx while it is updating; a proxy
in the way answers 200 with an HTML page. Each becomes the ImdsError subclass
that tells the caller whether to retry, with IMDS's own words when it sent any.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from sebridge.kernel.errors import (
    ImdsRequestError,
    ImdsThrottledError,
    ImdsUnavailableError,
    MalformedDocumentError,
)
from sebridge.kernel.retry_after import retry_after

__all__ = ["check_status", "error_detail", "failure_reason", "too_large"]


def check_status(
    method: str, path: str, status: int, headers: Mapping[str, str], data: bytes
) -> bytes:
    """The body of a 200; the typed error for anything else. Header names looked up in
    lower case (urllib3's headers answer in any case)."""
    what = f"IMDS {method} {path}"
    if status == 200:
        content_type = headers.get("content-type", "")
        if method == "GET" and "html" in content_type.lower():
            raise MalformedDocumentError(
                f"{what} answered with an HTML page, not JSON: is a proxy intercepting "
                "169.254.169.254? IMDS must be reached directly"
            )
        return data
    detail = error_detail(data)
    if status == 400:
        raise ImdsRequestError(f"{what} was refused (400): {detail}", status=status)
    if status == 429:
        raise ImdsThrottledError(
            f"{what} was throttled (429): IMDS allows 5 requests per second per VM",
            status=status,
            retry_after=retry_after(headers, default=None),
        )
    if status in (404, 410) or status >= 500:
        raise ImdsUnavailableError(
            f"{what} failed ({status}): {detail}; IMDS may be updating, will retry",
            status=status,
        )
    raise ImdsUnavailableError(f"{what} answered an unexpected {status}: {detail}", status=status)


def error_detail(data: bytes) -> str:
    """IMDS's own error text when it sent JSON; otherwise the first bytes of the body."""
    try:
        parsed = json.loads(data)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), str):
        newest = parsed.get("newest-versions")
        suffix = f" (newest versions: {', '.join(map(str, newest))})" if newest else ""
        return f"{parsed['error']}{suffix}"
    text = data[:120].decode("utf-8", "replace").strip()
    return text or "no body"


def failure_reason(exc: BaseException) -> str:
    """A short cause: 'connection refused' rather than urllib3's object reprs."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, ConnectionResetError):
            return "connection reset"
        cause = cause.__cause__ or cause.__context__
    text = str(exc)
    return text.split(": ", 1)[-1][:160] if text else type(exc).__name__


def too_large(method: str, path: str, length: int | None, cap: int) -> MalformedDocumentError:
    """An answer over `cap` bytes (`length` when it said so; None: it did not), refused."""
    size = f"{length:,} bytes" if length is not None else "longer"
    return MalformedDocumentError(
        f"IMDS answer to {method} {path} is {size}, over the {cap:,}-byte cap "
        "(a Scheduled Events document is a few KB): refused unread"
    )
