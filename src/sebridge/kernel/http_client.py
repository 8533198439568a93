"""sebridge's one HTTP client, over urllib3: IMDS, the webhook, Teams and Kubernetes.

(slack_sdk, jira and pymsteams keep their own; docs/ARCHITECTURE.md, "HTTP clients".)
It lives in the kernel, below IMDS's client and the integrations that share it: the
kernel's one module that imports a library (urllib3, well kept), not a unit of ours.
An `HttpClient` keeps its connections alive, a urllib3 pool per origin (through a
proxy: a ProxyManager's): no retries (IMDS's client and the dispatcher retry, after
Retry-After), no redirects, TLS verified against the system's CAs or a CA file,
`User-Agent: sebridge/VERSION`. Proxies as the environment names them, read at each
call (kernel/proxies.py), unless `proxies=False` (IMDS: link-local, a proxy in
between is what its `Metadata: true` header exists to catch; in-cluster Kubernetes).

Bounds: the connect, each read, and with `whole_call` the whole call, connect to the
answer's last byte, by a Deadline (kernel/deadline.py): a receiver dripping its answer
holds a sink no longer than its timeout. Its connections tell the calling thread's
cutoffs their socket; the client's own cutoff ends every call at once (`interrupt`).

No error quotes urllib3's text (a URL may carry a secret): a `NoAnswer` carries the
error under urllib3's wrappers (`cause`) and whether the request went out (`sent`).
urllib3's log lines are scrubbed of `secret_urls` while the client is open.
"""

from __future__ import annotations

import logging
import threading
import urllib.parse
from collections.abc import Iterable, Mapping
from contextlib import nullcontext
from typing import Any

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import HTTPError as Urllib3Error
from urllib3.exceptions import NewConnectionError
from urllib3.exceptions import TimeoutError as Urllib3Timeout

from sebridge import __version__
from sebridge.kernel import redact
from sebridge.kernel.deadline import Cutoff, Deadline, tell
from sebridge.kernel.proxies import proxy_for

__all__ = ["POOLS", "Answer", "HttpClient", "NoAnswer", "TimedOut", "TooLarge"]

_URLLIB3_LOGGERS = ("urllib3.connectionpool", "urllib3.util.retry")


class NoAnswer(Exception):
    """No whole answer: refused, reset, TLS, cut short... `cause`: the error under urllib3's
    wrappers (what the socket, ssl or http.client raised); `sent`: the request went out
    (the receiver may have acted on it)."""

    def __init__(self, cause: BaseException, *, sent: bool) -> None:
        super().__init__(type(cause).__name__)  # never the text: it may quote a URL
        self.cause = cause
        self.sent = sent


class TimedOut(NoAnswer):
    """No whole answer within the connect or read timeout, or the call's deadline."""


class TooLarge(Exception):
    """The answer is over the limit: `length` when its Content-Length said so (its body
    then not read at all), None when it did not."""

    def __init__(self, length: int | None) -> None:
        super().__init__(f"{length} bytes")
        self.length = length


class Answer:
    """An HTTP answer: its status, headers (looked up in any case) and body."""

    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


_sent = threading.local()  # .sent: this thread's call wrote its request


class _Told(HTTPConnection):
    """Tells the thread's cutoffs as it connects (its plain socket, while TLS shakes hands)
    and as it sends (a kept-alive connection does not connect again)."""

    def connect(self) -> None:
        tell(self)
        super().connect()

    def request(self, *args: Any, **kwargs: Any) -> None:
        tell(self)
        super().request(*args, **kwargs)
        _sent.sent = True


class _ToldTLS(HTTPSConnection):
    def connect(self) -> None:
        tell(self)
        super().connect()

    def request(self, *args: Any, **kwargs: Any) -> None:
        tell(self)
        super().request(*args, **kwargs)
        _sent.sent = True


class _Pool(urllib3.HTTPConnectionPool):
    ConnectionCls = _Told


class _TLSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _ToldTLS


# A PoolManager's pool classes (also a requests adapter's: integrations/library_deadlines.py).
POOLS: dict[str, type[urllib3.HTTPConnectionPool]] = {"http": _Pool, "https": _TLSPool}


class HttpClient:
    """Keep-alive connections to the hosts one part of sebridge calls.

    Args:
        timeout: seconds each read may wait; with `whole_call`, the whole call's too.
        connect_timeout: seconds a connect may take (default and at most: `timeout`,
            with `whole_call`).
        ca_file: the CAs that sign the servers' certificates (default: the system's).
        secret_urls: URLs (a webhook's) whose pieces never reach urllib3's log lines.
    """

    def __init__(
        self,
        *,
        timeout: float,
        connect_timeout: float | None = None,
        whole_call: bool = True,
        proxies: bool = True,
        ca_file: str | None = None,
        secret_urls: Iterable[str] = (),
        maxsize: int = 2,
    ) -> None:
        self._timeout = timeout
        connect = timeout if connect_timeout is None else connect_timeout
        self._connect = min(connect, timeout) if whole_call else connect
        self._whole = timeout if whole_call else None
        self._proxies = proxies
        self._headers = {"User-Agent": f"sebridge/{__version__}"}
        # Every pool's size and no retries; a TLS pool's certificate check.
        self._plain_kw: dict[str, Any] = {"maxsize": maxsize, "block": False, "retries": False}
        self._tls_kw = {**self._plain_kw, "cert_reqs": "CERT_REQUIRED", "ca_certs": ca_file}
        # Direct: a pool per origin, found by the origin alone (a PoolManager's URL parse
        # and pool key would add some 30 µs to every IMDS poll); proxied: a ProxyManager.
        self._pools: dict[tuple[str, str], urllib3.HTTPConnectionPool] = {}
        self._via: dict[str, urllib3.ProxyManager] = {}  # proxy URL -> its manager
        self._lock = threading.Lock()
        self._cutoff = Cutoff()
        self._timeouts: dict[float, urllib3.Timeout] = {}  # built once per read timeout
        self._quiet = _Scrub([piece for url in secret_urls for piece in redact.url_secrets(url)])
        if self._quiet.secrets:
            for name in _URLLIB3_LOGGERS:
                logging.getLogger(name).addFilter(self._quiet)

    def request(
        self,
        method: str,
        url: str,
        *,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        read_timeout: float | None = None,
        limit: int | None = None,
        excerpt: bool = False,
    ) -> Answer:
        """One attempt; any status is an answer.

        Args:
            read_timeout: this call's, instead of `timeout`.
            limit: bytes of the body taken at most (None: all of it). An answer over it
                raises TooLarge (unread when its Content-Length says so), or with
                `excerpt` is cut to it; the connection is then dropped.

        Raises:
            TimedOut: no whole answer in time.
            NoAnswer: none at all, or not a whole one.
            TooLarge: as `limit` says.
        """
        timeout = self._timeout_of(self._timeout if read_timeout is None else read_timeout)
        parts = urllib.parse.urlsplit(url)  # cached for a URL seen before
        proxy = proxy_for(url) if self._proxies else None
        opener: urllib3.HTTPConnectionPool | urllib3.ProxyManager
        if proxy is None:
            opener = self._pool(parts)
            url = (parts.path or "/") + ("?" + parts.query if parts.query else "")
        else:
            opener = self._proxy(proxy)
        deadline = Deadline(self._whole) if self._whole is not None else None
        _sent.sent = False
        with self._cutoff.watching(), deadline or nullcontext():
            try:
                response = opener.urlopen(
                    method,
                    url,
                    body=body,
                    headers=self._headers_with(headers),
                    timeout=timeout,
                    retries=False,
                    redirect=False,
                    preload_content=False,
                )
                data = _read(response, limit, excerpt)
            except (Urllib3Error, OSError) as exc:
                expired = deadline is not None and deadline.expired
                kind = TimedOut if expired or _timed_out(exc) else NoAnswer
                raise kind(_under(exc), sent=_sent.sent) from None
        return Answer(response.status, response.headers, data)

    def interrupt(self) -> None:
        """End every call in flight now (each raises NoAnswer), and every later one."""
        self._cutoff.cut()

    def close(self) -> None:
        """Close the kept-alive connections (a later call opens new ones); urllib3's log
        lines are no longer scrubbed."""
        with self._lock:
            for pool in self._pools.values():
                pool.close()
            for manager in self._via.values():
                manager.clear()
            self._pools.clear()
            self._via.clear()
        for name in _URLLIB3_LOGGERS:
            logging.getLogger(name).removeFilter(self._quiet)

    def _pool(self, parts: urllib.parse.SplitResult) -> urllib3.HTTPConnectionPool:
        pool = self._pools.get((parts.scheme, parts.netloc))
        if pool is None:
            with self._lock:
                pool = self._pools.get((parts.scheme, parts.netloc))
                if pool is None:
                    kw = self._tls_kw if parts.scheme == "https" else self._plain_kw
                    pool = POOLS[parts.scheme](parts.hostname or "", parts.port, **kw)
                    self._pools[parts.scheme, parts.netloc] = pool
        return pool

    def _proxy(self, proxy: str) -> urllib3.ProxyManager:
        with self._lock:
            manager = self._via.get(proxy)
            if manager is None:
                parts = urllib.parse.urlsplit(proxy)
                auth = ":".join(
                    urllib.parse.unquote(p or "") for p in (parts.username, parts.password)
                )
                said = urllib3.make_headers(proxy_basic_auth=auth) if parts.username else None
                manager = urllib3.ProxyManager(
                    proxy, num_pools=4, proxy_headers=said, **self._tls_kw
                )
                manager.pool_classes_by_scheme = POOLS
                self._via[proxy] = manager
        return manager

    def _headers_with(self, headers: Mapping[str, str] | None) -> dict[str, str]:
        """Ours, then the caller's in order, a later one replacing any of its name in any case."""
        merged = dict(self._headers)
        for name, value in (headers or {}).items():
            for same in [key for key in merged if key.lower() == name.lower()]:
                del merged[same]
            merged[name] = value
        return merged

    def _timeout_of(self, read: float) -> urllib3.Timeout:
        timeout = self._timeouts.get(read)
        if timeout is None:
            timeout = self._timeouts[read] = urllib3.Timeout(connect=self._connect, read=read)
        return timeout


def _read(response: urllib3.BaseHTTPResponse, limit: int | None, excerpt: bool) -> bytes:
    if limit is None:
        data = response.read()
        response.release_conn()
        return data
    said = response.headers.get("content-length", "")
    if not excerpt and said.isdigit() and int(said) > limit:
        response.close()  # unread: the connection is dropped
        raise TooLarge(int(said))
    data = response.read(limit + 1)
    if len(data) <= limit:
        response.release_conn()
        return data
    response.close()
    if not excerpt:
        raise TooLarge(None)
    return data[:limit]


def _timed_out(exc: BaseException) -> bool:
    # NewConnectionError is a subclass of urllib3's TimeoutError, yet no timeout.
    return isinstance(exc, Urllib3Timeout) and not isinstance(exc, NewConnectionError)


def _under(exc: BaseException) -> BaseException:
    """The error under urllib3's wrappers: its `from` cause, or the one it holds."""
    for _ in range(8):  # a chain is a few links long; a loop in one must not hang
        if not isinstance(exc, Urllib3Error):
            break
        held = [a for a in exc.args if isinstance(a, BaseException)]
        inner = held[-1] if held else exc.__cause__ or exc.__context__
        if inner is None:
            break
        exc = inner
    return exc


class _Scrub(logging.Filter):
    """Removes secrets from the log records of urllib3 that mention them."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        clean = redact.scrub(text, self.secrets)
        if clean != text:
            record.msg, record.args = clean, None
        return True
