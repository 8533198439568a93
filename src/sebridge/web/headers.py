"""Security headers on every answer of the HTTP server, waitress's own included.

Routes answer through `secured()`, which adds each header the route did not
set itself (the approval page keeps its own Content-Security-Policy).
Waitress writes some answers without calling any application: a request it
cannot parse (400), a body or header over its limits (413, 431), an
application that failed after it started answering (500). Those come from
its `ErrorTask`; `secure_waitress_errors()` gives the server's connections
an error task that adds the same headers before waitress writes its own.
See docs/ARCHITECTURE.md, "Seams".
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from waitress.task import ErrorTask

from sebridge.kernel.wsgi import StartResponse, WsgiApp

__all__ = ["SECURITY_HEADERS", "secure_waitress_errors", "secured", "with_security_headers"]

# What a browser must not do with any answer of ours: guess its type, frame it,
# load anything from it or leak the URL (an approval link is a credential) onward.
SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'; base-uri 'none'"),
    ("Referrer-Policy", "no-referrer"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
    ("Cache-Control", "no-store"),
)


def _missing(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    given = {name.lower() for name, _ in headers}
    return [(name, value) for name, value in SECURITY_HEADERS if name.lower() not in given]


def with_security_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """`headers`, then each security header they do not set."""
    return [*headers, *_missing(headers)]


def secured(app: WsgiApp) -> WsgiApp:
    """`app`, with every security header it did not set added to each of its answers."""

    def wrapped(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        def start(status: str, headers: list[tuple[str, str]], *exc_info: Any) -> Any:
            return start_response(status, with_security_headers(headers), *exc_info)

        return app(environ, start)

    return wrapped


class _SecuredErrorTask(ErrorTask):  # type: ignore[misc]  # waitress has no types
    """Waitress's error answer (400, 413, 431, 500...) with the security headers."""

    def execute(self) -> None:
        # Before waitress's own: the headers are written with the body, in execute().
        self.response_headers.extend(SECURITY_HEADERS)
        super().execute()


def secure_waitress_errors(server: Any) -> None:
    """Give `server` (from waitress.create_server) connections whose error answers carry
    the security headers. Whatever connection class it uses is kept, only extended."""
    base = server.channel_class
    server.channel_class = type(base.__name__, (base,), {"error_task_class": _SecuredErrorTask})
