"""Whole-call deadlines for the libraries that make their own HTTP calls: jira, slack_sdk.

A `Deadline` (kernel/deadline.py) shuts a call's socket down when its time is up; this
module gets it the socket when a library, not sebridge, opens the connection, through
the hooks the libraries document. (Our own calls go through kernel/http_client.py.)

- requests (jira): `DeadlineAdapter`, a transport adapter whose pool managers build
  kernel/http_client.py's pools (`pool_classes_by_scheme`), whose connections tell the
  calling thread's deadline their socket as they connect and as they send; it runs
  every request, body read included, under its deadline.
- ssl (urllib, and so slack_sdk's WebClient, which takes an `ssl` context): a context
  whose `sslsocket_class` tells the deadline its socket as its handshake starts.

A call cut short raises `CallExpired` (a requests Timeout, an OSError): the sink says the
receiver did not answer within its timeout, and the dispatcher retries.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3 import PoolManager

from sebridge.kernel.deadline import Deadline, tell
from sebridge.kernel.http_client import POOLS

__all__ = ["CallExpired", "DeadlineAdapter", "reporting_context"]


class CallExpired(requests.exceptions.Timeout):
    """The whole call did not end within `seconds` (its deadline cut it short)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no whole answer within {seconds:g} s")
        self.seconds = seconds


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
        self.poolmanager.pool_classes_by_scheme = POOLS

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> PoolManager:
        manager: PoolManager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if not proxy.lower().startswith("socks"):  # a SOCKS manager keeps its own pools
            manager.pool_classes_by_scheme = POOLS
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
        with Deadline(self.seconds) as deadline:
            try:
                response = super().send(request, stream, (connect, read), verify, cert, proxies)
                if not stream:
                    response.content  # noqa: B018  read here, within the deadline
            except OSError as exc:  # requests' errors are OSErrors
                if deadline.expired and not isinstance(exc, requests.exceptions.Timeout):
                    raise CallExpired(self.seconds) from None
                raise
        return response


class _ReportingTls(ssl.SSLSocket):
    """Tells the thread's deadline its socket as its handshake starts (urllib opens one
    per call)."""

    def do_handshake(self, block: bool = False) -> None:
        tell(self)
        super().do_handshake(block)


def reporting_context() -> ssl.SSLContext:
    """`ssl.create_default_context()` whose sockets tell a `Deadline` they are the call's."""
    context = ssl.create_default_context()
    context.sslsocket_class = _ReportingTls
    return context
