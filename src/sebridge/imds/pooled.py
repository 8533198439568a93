"""IMDS over urllib3: every call but the poll's GET on plain http (imds/wire.py).

The approvals' POST, the compute name, every call to an https endpoint, and a GET
the fast path gave up on (chunked, no length, a stale connection). Never through a
proxy: urllib3 directly reads no proxy variables. ImdsClient imports this module at
the first call that needs it: a daemon that only polls never loads urllib3 and
http.client (1.2 MiB of VmRSS; tests/test_run_imports.py).
"""

from __future__ import annotations

import urllib3
from urllib3.exceptions import HTTPError as Urllib3Error
from urllib3.exceptions import NewConnectionError
from urllib3.exceptions import TimeoutError as Urllib3Timeout

from sebridge.imds.wire import RawResponse

__all__ = ["Pool", "TimedOut", "Unreachable"]


class Unreachable(Exception):
    """No answer: refused, reset, a name that does not resolve... (`cause`: what urllib3
    or the socket raised, for imds/answers.py's failure_reason)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class TimedOut(Exception):
    """IMDS did not answer within the read timeout."""


class Pool:
    """One endpoint's keep-alive connections (two: a poll and an approval may overlap;
    each keeps its own)."""

    def __init__(self, scheme: str, host: str, port: int, connect_timeout: float) -> None:
        pool_class = (
            urllib3.HTTPSConnectionPool if scheme == "https" else urllib3.HTTPConnectionPool
        )
        self._pool = pool_class(host, port, maxsize=2, block=False, retries=False)
        self._connect_timeout = connect_timeout
        self._timeouts: dict[float, urllib3.Timeout] = {}  # built once per read timeout

    def request(
        self,
        method: str,
        url: str,
        body: bytes | None,
        headers: dict[str, str],
        *,
        read_timeout: float,
        limit: int,
    ) -> RawResponse:
        """(status, headers with lower-case names, body). At most `limit` + 1 bytes of the
        body are read: a longer one comes back that long, its connection dropped.

        Raises:
            Unreachable: no answer (refused, reset, ...).
            TimedOut: no answer within `read_timeout`.
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
            data = response.read(limit + 1)
            if len(data) > limit:
                response.close()  # the rest is never read: the connection is dropped
            else:
                response.release_conn()
        except NewConnectionError as exc:  # a subclass of urllib3's TimeoutError, yet not one
            raise Unreachable(exc) from None
        except Urllib3Timeout:
            raise TimedOut() from None
        except (Urllib3Error, OSError) as exc:
            raise Unreachable(exc) from None
        return response.status, {k.lower(): v for k, v in response.headers.items()}, data

    def close(self) -> None:
        """Close the kept-alive connections."""
        self._pool.close()
