"""The bridge's HTTP server: waitress (a production WSGI server) on http.listen.

Routes: POST /slack/events (Slack HTTP mode) and GET /healthz; approval links
and metrics join them later. Bound to 127.0.0.1 by default: put a TLS
reverse proxy in front to expose it.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from waitress.server import create_server

__all__ = ["HttpServer"]

log = logging.getLogger(__name__)

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


class HttpServer:
    """Serves exact paths with WSGI apps, in a background thread.

    Args:
        routes: path -> WSGI app (e.g. "/slack/events" -> Bolt's handler).
        health: returns the JSON object GET /healthz answers with.
    """

    def __init__(
        self,
        host: str,
        port: int,
        routes: Mapping[str, WsgiApp],
        health: Callable[[], dict[str, Any]] = lambda: {"status": "ok"},
    ) -> None:
        self._routes = dict(routes)
        self._health = health
        self._server = create_server(
            self._app,
            host=host,
            port=port,
            threads=4,
            ident="sebridge",
            clear_untrusted_proxy_headers=True,
        )
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        return int(self._server.effective_port)

    def start(self) -> None:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(target=self._server.run, name="http", daemon=True)
        self._thread.start()
        log.info("HTTP server listening on %s:%d", self._server.effective_host, self.port)

    def stop(self) -> None:
        """Stop accepting, close the socket, and end waitress's worker threads."""
        self._server.close()
        if self._thread:
            self._thread.join(timeout=5)
        self._server.task_dispatcher.shutdown()

    def _app(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/healthz" and environ.get("REQUEST_METHOD") in ("GET", "HEAD"):
            return _json(start_response, "200 OK", self._health())
        route = self._routes.get(path)
        if route is None:
            return _json(start_response, "404 Not Found", {"error": f"no such path: {path}"})
        return route(environ, start_response)


def _json(start_response: StartResponse, status: str, body: dict[str, Any]) -> list[bytes]:
    data = json.dumps(body).encode()
    start_response(
        status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
    )
    return [data]
