"""Whole calls under a `Deadline` for the sinks whose library makes the connection.

`Deadline` (deadline.py) shuts a call's socket down when its time is up; this module
gets it the socket when a library, not sebridge, opens the connection. While a call
runs under `bounded(seconds)`, the connection it uses reports itself to the calling
thread's call, through the hooks the libraries document:

- urllib3 (requests, and so Teams, Jira and Kubernetes): `DeadlineAdapter`, a requests
  transport adapter whose pool manager builds pools (`pool_classes_by_scheme`) whose
  `ConnectionCls` reports each connection as it connects and as it sends a request;
  it runs every request, body read included, under its deadline.
- ssl (urllib, and so slack_sdk's WebClient, which takes an `ssl` context): a context
  whose `sslsocket_class` reports its socket as its handshake starts.

A call cut short raises `CallExpired` (a requests Timeout, an OSError): the sink says the
receiver did not answer within its timeout, and the dispatcher retries.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3 import HTTPConnectionPool, HTTPSConnectionPool, PoolManager
from urllib3.connection import HTTPConnection, HTTPSConnection

from sebridge.integrations.deadline import Deadline

__all__ = ["CallExpired", "DeadlineAdapter", "bounded", "reporting_context"]


class CallExpired(requests.exceptions.Timeout):
    """The whole call did not end within `seconds` (its deadline cut it short)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no whole answer within {seconds:g} s")
        self.seconds = seconds


class _Call:
    """The socket of the call in flight on one thread, as its connection last reported it."""

    def __init__(self) -> None:
        self._find: Callable[[], object] = lambda: None

    def report(self, find: Callable[[], object]) -> None:
        self._find = find

    def socket(self) -> socket.socket | None:
        sock = self._find()
        return sock if isinstance(sock, socket.socket) else None


_calls = threading.local()  # .call: the _Call of this thread's bounded call, or None


def _report(find: Callable[[], object]) -> None:
    call: _Call | None = getattr(_calls, "call", None)
    if call is not None:
        call.report(find)


@contextlib.contextmanager
def bounded(seconds: float) -> Iterator[Deadline]:
    """Run the block's call within `seconds`, connect to the last byte read: what a reporting
    connection (below) opens or uses in this thread is shut down when the time is up."""
    call = _Call()
    outer = getattr(_calls, "call", None)
    _calls.call = call
    try:
        with Deadline(seconds, call.socket) as deadline:
            yield deadline
    finally:
        _calls.call = outer


# urllib3: connections that report themselves (the deadline reads their `sock` when it
# fires: the plain socket while TLS shakes hands, the TLS one after).


class _ReportingHttp(HTTPConnection):
    def connect(self) -> None:
        _report(lambda: self.sock)
        super().connect()

    def request(self, *args: Any, **kwargs: Any) -> None:
        _report(lambda: self.sock)  # a kept-alive connection does not connect again
        super().request(*args, **kwargs)


class _ReportingHttps(HTTPSConnection):
    def connect(self) -> None:
        _report(lambda: self.sock)
        super().connect()

    def request(self, *args: Any, **kwargs: Any) -> None:
        _report(lambda: self.sock)
        super().request(*args, **kwargs)


class _HttpPool(HTTPConnectionPool):
    ConnectionCls = _ReportingHttp


class _HttpsPool(HTTPSConnectionPool):
    ConnectionCls = _ReportingHttps


_POOLS = {"http": _HttpPool, "https": _HttpsPool}


class DeadlineAdapter(HTTPAdapter):
    """A requests transport adapter that bounds each whole request (connect, send, the
    answer's every byte) by `seconds`: mount it on a session with `mount(session)`."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        super().__init__()

    def mount(self, session: requests.Session) -> None:
        """Use it for every http:// and https:// URL the session calls."""
        session.mount("http://", self)
        session.mount("https://", self)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _POOLS

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> PoolManager:
        manager: PoolManager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if not proxy.lower().startswith("socks"):  # a SOCKS manager keeps its own pools
            manager.pool_classes_by_scheme = _POOLS
        return manager

    def send(  # noqa: PLR0917  requests calls it with these, positionally
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: float | tuple[float, float] | tuple[float, None] | None = None,
        verify: bool | str = True,
        cert: bytes | str | tuple[bytes | str, bytes | str] | None = None,
        proxies: Mapping[str, str] | None = None,
    ) -> requests.Response:
        connect, read = timeout if isinstance(timeout, tuple) else (timeout, timeout)
        # A connect not done when the time is up has no socket yet to shut: bound it alike.
        connect = self.seconds if connect is None else min(connect, self.seconds)
        read = self.seconds if read is None else read
        with bounded(self.seconds) as deadline:
            try:
                response = super().send(request, stream, (connect, read), verify, cert, proxies)
                if not stream:
                    response.content  # noqa: B018  read here, within the deadline
            except OSError as exc:  # requests' errors are OSErrors
                if deadline.expired and not isinstance(exc, requests.exceptions.Timeout):
                    raise CallExpired(self.seconds) from None
                raise
        return response


# ssl: sockets that report themselves as their handshake starts (urllib opens one per call).


class _ReportingTls(ssl.SSLSocket):
    def do_handshake(self, block: bool = False) -> None:
        _report(lambda: self)
        super().do_handshake(block)


def reporting_context() -> ssl.SSLContext:
    """`ssl.create_default_context()` whose sockets report themselves to a `bounded` call."""
    context = ssl.create_default_context()
    context.sslsocket_class = _ReportingTls
    return context
