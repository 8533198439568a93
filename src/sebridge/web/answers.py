"""The JSON answers the server writes itself: probes, 404, 405, a route's 500.

One shape for every answer the server (web/server.py) writes itself, on the traffic port
and on the probe port alike.
"""

from __future__ import annotations

import json
from typing import Any

from sebridge.web.headers import with_security_headers

__all__ = ["json_answer"]

_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


def json_answer(
    status: int, body: dict[str, Any], headers: list[tuple[str, str]] | None = None
) -> tuple[str, list[tuple[str, str]], bytes]:
    """(status line, headers with the security ones, body) of a JSON answer."""
    data = json.dumps(body).encode()
    return (
        f"{status} {_REASONS.get(status, 'Internal Server Error')}",
        with_security_headers(
            [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(data))),
                ("Cache-Control", "no-store"),
                *(headers or []),
            ]
        ),
        data,
    )
