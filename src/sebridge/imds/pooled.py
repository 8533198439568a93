"""IMDS over urllib3: every call of the client, on one endpoint's keep-alive pool.

Never through a proxy: an HTTPConnectionPool reads no proxy variables (IMDS is
link-local, and a proxy in between is what the `Metadata: true` header exists to
catch). The pool's connections are known to it, so interrupt() can end a call in
flight from another thread (the daemon's stop, engine/schedule.py).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import weakref
from collections.abc import Mapping
from typing import Any

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import HTTPError as Urllib3Error
from urllib3.exceptions import NewConnectionError
from urllib3.exceptions import TimeoutError as Urllib3Timeout

__all__ = ["Pool", "RawResponse", "TimedOut", "TooLarge", "Unreachable"]

# status, headers (looked up in any case), body
RawResponse = tuple[int, Mapping[str, str], bytes]


class Unreachable(Exception):
    """No answer: refused, reset, a name that does not resolve... (`cause`: what urllib3
    or the socket raised, for imds/answers.py's failure_reason)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class TimedOut(Exception):
    """IMDS did not answer within the read timeout."""


class TooLarge(Exception):
    """The answer is over the limit: `length` when its Content-Length said so (its body
    then not read at all), None when it did not."""

    def __init__(self, length: int | None) -> None:
        super().__init__(f"{length} bytes")
        self.length = length


class _Live:
    """The pool's connected connections; once interrupted, each is shut down, a
    connection made later as soon as it connects."""

    def __init__(self) -> None:
        self._connections: weakref.WeakSet[HTTPConnection] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._interrupted = False

    def add(self, connection: HTTPConnection) -> None:
        with self._lock:
            self._connections.add(connection)
            if not self._interrupted:
                return
        _shut(connection)

    def interrupt(self) -> None:
        with self._lock:
            self._interrupted = True
            connections = list(self._connections)
        for connection in connections:
            _shut(connection)


def _shut(connection: HTTPConnection) -> None:
    """A read waiting on `connection`'s socket, on any thread, sees the connection end;
    the thread that owns it closes it."""
    sock = connection.sock
    if sock is not None:
        with contextlib.suppress(OSError):  # not connected (yet, or any more)
            sock.shutdown(socket.SHUT_RDWR)


class _Known(HTTPConnection):
    """A connection that tells the pool's _Live once it is connected."""

    def __init__(self, *args: Any, live: _Live, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._live = live

    def connect(self) -> None:
        super().connect()
        self._live.add(self)


class _KnownTLS(HTTPSConnection):
    def __init__(self, *args: Any, live: _Live, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._live = live

    def connect(self) -> None:
        super().connect()
        self._live.add(self)


class _PlainPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _Known


class _TLSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _KnownTLS


class Pool:
    """One endpoint's keep-alive connections (two: a poll and an approval may overlap;
    each keeps its own)."""

    def __init__(self, scheme: str, host: str, port: int, connect_timeout: float) -> None:
        self._live = _Live()
        pool_class = _TLSPool if scheme == "https" else _PlainPool
        # The pool's extra keywords go to each connection it makes (urllib3's conn_kw).
        self._pool = pool_class(host, port, maxsize=2, block=False, retries=False, live=self._live)
        self._connect_timeout = connect_timeout
        self._timeouts: dict[float, urllib3.Timeout] = {}  # built once per read timeout

    def request(
        self,
        method: str,
        url: str,
        body: bytes | None,
        headers: Mapping[str, str],
        *,
        read_timeout: float,
        limit: int,
    ) -> RawResponse:
        """(status, headers, body), the connection kept for the next call.

        Raises:
            Unreachable: no answer (refused, reset, cut short by interrupt(), ...).
            TimedOut: no answer within `read_timeout`.
            TooLarge: a body over `limit` bytes (at most `limit` + 1 of them read); the
                connection is dropped.
        """
        timeout = self._timeouts.get(read_timeout)
        if timeout is None:
            timeout = urllib3.Timeout(connect=self._connect_timeout, read=read_timeout)
            self._timeouts[read_timeout] = timeout
        try:
            response = self._pool.urlopen(
                method,
                url,
                body=body,
                headers=headers,
                timeout=timeout,
                retries=False,
                redirect=False,
                preload_content=False,
            )
            said = response.headers.get("content-length", "")
            if said.isdigit() and int(said) > limit:
                response.close()  # unread: the connection is dropped
                raise TooLarge(int(said))
            data = response.read(limit + 1)
            if len(data) > limit:
                response.close()
                raise TooLarge(None)
            response.release_conn()
        except NewConnectionError as exc:  # a subclass of urllib3's TimeoutError, yet not one
            raise Unreachable(exc) from None
        except Urllib3Timeout:
            raise TimedOut() from None
        except (Urllib3Error, OSError) as exc:
            raise Unreachable(exc) from None
        return response.status, response.headers, data

    def interrupt(self) -> None:
        """End every call in flight now (each raises Unreachable), and every later one."""
        self._live.interrupt()

    def close(self) -> None:
        """Close the kept-alive connections."""
        self._pool.close()
