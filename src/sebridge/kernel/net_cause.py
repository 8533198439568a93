"""Why a request got no answer, in a few words, never quoting the exception's text.

HTTP clients' own messages quote the URL they asked (a Teams webhook's URL
carries the signature that grants posting), so a message about a failed
request says the kind of failure found along the exception's chain: refused,
reset, timed out, a name that does not resolve, TLS; else the exception's
type. The chains are urllib3's (ours: kernel/http_client.py hands over the
error under its wrappers, so only the kinds are read) and requests' (jira's:
an error holding urllib3's, which keeps the socket's as its `reason` or cause).
"""

from __future__ import annotations

import socket
import ssl

__all__ = ["no_answer_cause"]

_DEPTH = 12  # a chain is a few links long; a loop in one must not hang the caller


def no_answer_cause(exc: BaseException) -> str:
    """'connection refused', 'timed out', ... for `exc` or what caused it."""
    for link in _chain(exc):
        said = _kind(link)
        if said:
            return said
    return type(exc).__name__


# First match wins: a certificate error is also an SSLError.
_KINDS: tuple[tuple[type[BaseException], str], ...] = (
    (ConnectionRefusedError, "connection refused"),
    (ConnectionResetError, "connection reset"),
    (socket.gaierror, "the host name does not resolve"),
    (ssl.SSLCertVerificationError, "its TLS certificate is not trusted"),
    (ssl.SSLError, "TLS failed"),
    (TimeoutError, "timed out"),
)


def _kind(exc: BaseException) -> str:
    said = next((words for kind, words in _KINDS if isinstance(exc, kind)), "")
    # urllib3's ReadTimeoutError and requests' ReadTimeout are no TimeoutError (the kernel
    # imports only the standard library: by name).
    if not said and "Timeout" in type(exc).__name__:
        said = "timed out"
    return said


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo and len(seen) < _DEPTH:
        link = todo.pop(0)
        if any(link is s for s in seen):
            continue
        seen.append(link)
        reason = getattr(link, "reason", None)
        nested = [a for a in link.args if isinstance(a, BaseException)]
        for more in (link.__cause__, link.__context__, reason, *nested):
            if isinstance(more, BaseException):
                todo.append(more)
    return seen
