"""The daemon's HTTP servers: waitress on [http] listen, hardened once for every route,
and the same on [http] probe_listen for the probes alone.

Routes come from integrations (Slack's /slack/events) and the core
(/metrics); the server itself answers GET /healthz and /readyz (and /livez,
when given). Bodies are capped before anything reads them (413), a request's
headers and body must arrive within their deadlines however slowly they
trickle (web/deadlines.py), idle connections are closed after `IDLE_TIMEOUT`,
and at the connection limit those waiting longest for their request make
room: silent or trickling clients cannot lock out /healthz for long. A probe
that must never wait behind a crowd is asked on the probe listener: a server of
its own, with its own port, loop and threads (docs/ARCHITECTURE.md, "Metrics
and probes"). Bound to 127.0.0.1 by default: put a TLS reverse proxy in front
to expose it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from waitress import wasyncore

from sebridge.kernel.errors import ConfigError
from sebridge.kernel.wsgi import StartResponse, WsgiApp
from sebridge.web.answers import json_answer
from sebridge.web.deadlines import deadline_server, room_for
from sebridge.web.headers import secure_waitress_errors, secured

__all__ = ["CORE_PATHS", "MAX_BODY", "HttpServer"]

log = logging.getLogger(__name__)

# Slack's largest interactive payload (a message of 50 blocks, form-encoded)
# stays well under this.
MAX_BODY = 1024 * 1024
IDLE_TIMEOUT = 15  # seconds a connection may neither send nor read
HEADER_TIMEOUT = 10.0  # seconds for a request's headers, however they trickle in
BODY_TIMEOUT = 30.0  # then for its body: 1 MiB at 35 KB/s
# More than a crowd of a thousand: its clients wait out their deadlines instead of
# taking turns at the limit (bench/http_trickle.py). The open files limit is raised to fit.
CONNECTION_LIMIT = 2000
# The core's paths: no integration may claim one.
CORE_PATHS = ("/healthz", "/readyz", "/livez", "/metrics")
THREADS = 4  # waitress's threads answering requests

Health = Callable[[], tuple[int, dict[str, Any]]]


class HttpServer:
    """Serves routes (exact paths, or prefixes ending in "/") in a background thread.

    Args:
        routes: path -> WSGI app (e.g. "/slack/events" -> Bolt's handler).
        health: returns (status, JSON body) for GET /healthz.
        ready: returns (status, JSON body) for GET /readyz (default: as /healthz).
        live: returns (status, JSON body) for GET /livez (default: no /livez).
        key: the configuration key of the address, named when it cannot be listened on.
        threads: waitress's threads answering requests.
        idle_timeout: seconds before a connection that neither sends nor reads is closed.
        header_timeout: seconds a connection has for a request's headers, from when it
            was accepted or its last answer was written (web/deadlines.py).
        body_timeout: seconds it then has for the body.
        connection_limit: connections open at once; at the limit the one waiting longest
            for its request is closed to make room.
    """

    def __init__(
        self,
        host: str,
        port: int,
        routes: Mapping[str, WsgiApp],
        health: Health | None = None,
        *,
        ready: Health | None = None,
        live: Health | None = None,
        key: str = "http.listen",
        threads: int = THREADS,
        idle_timeout: int = IDLE_TIMEOUT,
        header_timeout: float = HEADER_TIMEOUT,
        body_timeout: float = BODY_TIMEOUT,
        connection_limit: int = CONNECTION_LIMIT,
    ) -> None:
        self._routes = dict(routes)
        health = health or (lambda: (200, {"status": "ok"}))
        self._probes = {"/healthz": health, "/readyz": ready or health}
        if live is not None:
            self._probes["/livez"] = live
        try:
            self._server = deadline_server(
                secured(self._app),  # security headers on every answer (web/headers.py)
                header_timeout=header_timeout,
                body_timeout=body_timeout,
                host=host,
                port=port,
                threads=threads,
                ident="sebridge",
                clear_untrusted_proxy_headers=True,
                max_request_body_size=MAX_BODY + 1,  # waitress refuses sizes >= its limit
                channel_timeout=idle_timeout,
                cleanup_interval=1,
                connection_limit=room_for(connection_limit),
                asyncore_use_poll=True,  # select() fails on a descriptor over 1023
            )
        except OSError as exc:  # in use, not ours to bind, no such address: a start-up error
            why = exc.strerror or str(exc)
            where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            raise ConfigError(f"{key}: cannot listen on {where}: {why}") from None
        secure_waitress_errors(self._server)  # and on the answers waitress writes itself
        self._name = "http-probes" if key == "http.probe_listen" else "http"
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        return int(self._server.effective_port)

    def start(self) -> None:
        """Serve in daemon threads: waitress's loop and its threads."""
        self._thread = threading.Thread(target=self._server.run, name=self._name, daemon=True)
        self._thread.start()
        what = "probes" if self._name == "http-probes" else "HTTP server"
        log.info("%s listening on %s:%d", what, self._server.effective_host, self.port)

    def stop(self) -> None:
        """Stop accepting, let the requests under way finish (up to 5 s) and answer them,
        then close every socket and end waitress's worker threads.

        In that order: a worker thread writes its answer to the connection and wakes the
        loop through the trigger pipe, which waitress holds as a bare fd number. Closed
        before the workers had finished, a late worker wrote to the closed pipe (EBADF) or,
        once the number was reused, into another file or socket of the process. Sockets
        are closed on the loop's own thread while it runs (closed from another thread, the
        loop's select() dies with EBADF); the pipe itself only once the loop has ended and
        no worker is left to wake it.
        """
        server = self._server
        thread = self._thread
        loop = thread if thread is not None and thread.is_alive() else None

        def stop_accepting() -> None:
            # Not server.close(): that closes the trigger pipe too.
            wasyncore.dispatcher.close(server)

        def close_connections() -> None:
            stop_accepting()
            trigger = server.trigger
            try:
                for channel in list(server._map.values()):
                    if channel is not trigger and channel.writable():
                        channel.handle_write()  # sends what the socket takes of an answer
            finally:
                # Out of the map, so the loop ends, but open: whoever pulled the trigger to
                # get here may not have written its byte yet.
                trigger.del_channel()
                wasyncore.close_all(server._map)

        self._on_loop(loop, stop_accepting)
        server.task_dispatcher.shutdown()  # waits for the requests under way, up to 5 s
        workers_left = bool(server.task_dispatcher.threads)
        self._on_loop(loop, close_connections)
        if loop is not None:
            loop.join(timeout=5)
            if loop.is_alive():
                log.warning("the HTTP server's loop did not stop; its sockets are left open")
                return
            if server._map:  # the loop died before it closed them
                close_connections()
        if workers_left:
            # A worker stuck in a route may still wake the loop: its pipe stays open (3 fds)
            # rather than a later write landing on a reused fd number.
            log.warning("an HTTP request is still running; its wake-up pipe is left open")
        else:
            server.trigger.close()

    def _on_loop(self, loop: threading.Thread | None, action: Callable[[], None]) -> None:
        """Run `action` on the loop's thread while it runs (queued: returns at once), else here."""
        if loop is not None:
            self._server.trigger.pull_trigger(action)
        else:
            action()

    def _app(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        try:
            return self._answer(environ, start_response)
        except Exception:  # a bug: one 500 for the caller, the traceback for us
            log.exception("%s %s failed", environ.get("REQUEST_METHOD"), environ.get("PATH_INFO"))
            return _json(start_response, 500, {"error": "internal error"})

    def _answer(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        probe = self._probes.get(path)
        if probe is not None:
            if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
                return _json(start_response, 405, {"error": "use GET"}, [("Allow", "GET, HEAD")])
            return _json(start_response, *probe())
        route = self._route(path)
        if route is None:
            return _json(start_response, 404, {"error": "no such path"})
        return route(environ, start_response)

    def _route(self, path: str) -> WsgiApp | None:
        if path in self._routes:
            return self._routes[path]
        for prefix, app in self._routes.items():
            if prefix.endswith("/") and path.startswith(prefix):
                return app
        return None


def _json(
    start_response: StartResponse,
    status: int,
    body: dict[str, Any],
    headers: list[tuple[str, str]] | None = None,
) -> list[bytes]:
    line, answer_headers, data = json_answer(status, body, headers)
    start_response(line, answer_headers)
    return [data]
