"""One jira.JIRA per user of it, built on first use, each call mapped to a DeliveryError.

The library's server-info call stays: it tells Cloud (which removed
`/search` for `/search/jql` with a paging token) from Data Center. Its own
retries are off (`max_retries=0`): `ResilientSession` would retry a POST
after a 503 or a dropped connection, and a POST that landed before its
answer was lost makes a second issue. The dispatcher retries instead, and
the sink looks for what a lost attempt left before it tries again.
Requests honour HTTP(S)_PROXY and NO_PROXY (requests' `trust_env`). Each request's
whole answer, connect to its last byte, is bounded by the read timeout
(integrations/library_deadlines.py): a Jira, or a proxy before it, that drips its answer
holds the sink no longer. The library keeps its requests session in `_session`,
with no public way to give it a transport adapter: the adapter is mounted there
before the first request (the server-info call, made here rather than by the
constructor, which would make it before).
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from sebridge.integrations.jira.errors import delivery_error
from sebridge.integrations.jira.settings import JiraSettings
from sebridge.integrations.library_deadlines import DeadlineAdapter
from sebridge.kernel.errors import DeliveryError

if TYPE_CHECKING:
    from jira import JIRA

__all__ = ["TIMEOUT", "JiraApi", "jql_string"]

TIMEOUT = (5.0, 20.0)  # seconds: connect, read; the dispatcher retries on timeout
_T = TypeVar("_T")


def jql_string(value: str) -> str:
    """A JQL string literal: double quotes, with backslash and quote escaped."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class JiraApi:
    """A lazily connected Jira client whose failures say what to fix, never the token.

    Thread-safe to build; give each thread of work (the sink, the status
    watcher) its own JiraApi, as requests' Session is not meant to be shared.
    """

    def __init__(self, settings: JiraSettings, *, timeout: tuple[float, float] = TIMEOUT) -> None:
        self.settings = settings
        self._timeout = timeout
        self._lock = threading.Lock()
        self._jira: JIRA | None = None
        token = settings.api_token.reveal()
        basic = base64.b64encode(f"{settings.email}:{token}".encode()).decode() if token else ""
        # Everything that could echo a credential: the token, the PAT, the Basic header value.
        self.secrets: tuple[str, ...] = tuple(s for s in (token, settings.pat.reveal(), basic) if s)

    def call(self, what: str, fn: Callable[[JIRA], _T]) -> _T:
        """Run `fn` with the client; any failure becomes a DeliveryError about `what`."""
        try:
            return fn(self._client())
        except DeliveryError:
            raise
        except Exception as exc:  # every failure is classified: none escapes raw
            raise delivery_error(
                exc,
                what=what,
                secrets=self.secrets,
                server=self.settings.url,
                sign_in="jira.api_token" if self.settings.cloud else "jira.pat",
            ) from None

    def search(
        self, jql: str, what: str, *, fields: Sequence[str] = ("labels",), expand: str | None = None
    ) -> list[dict[str, Any]]:
        """Every issue matching `jql` (all pages), as Jira's JSON."""

        def run(jira: JIRA) -> list[dict[str, Any]]:
            found = jira.search_issues(
                jql, maxResults=0, fields=list(fields), expand=expand, json_result=False
            )
            return [dict(issue.raw) for issue in found]

        return self.call(what, run)

    @property
    def deployment(self) -> str:
        """ "Cloud", "Server" or "DataCenter" (connects if not yet connected)."""
        return str(self.call("read Jira's server info", lambda jira: jira.deploymentType or ""))

    def close(self) -> None:
        """Close the HTTP session."""
        with self._lock:
            if self._jira is not None:
                self._jira.close()  # type: ignore[no-untyped-call]
                self._jira = None

    def _client(self) -> JIRA:
        with self._lock:
            if self._jira is None:
                self._jira = self._connect()
            return self._jira

    def _connect(self) -> JIRA:
        from jira import JIRA  # imported here: config loading must stay cheap

        s = self.settings
        auth: dict[str, Any] = (
            {"token_auth": s.pat.reveal()}
            if s.pat
            else {"basic_auth": (s.email, s.api_token.reveal())}
        )
        jira = JIRA(
            server=s.url,
            options={"check_update": False},
            get_server_info=False,  # made below, once the deadline can reach its socket
            max_retries=0,  # see the module docstring: a retried POST duplicates issues
            timeout=self._timeout,
            logging=False,  # its warnings may print URLs and headers
            **auth,
        )
        DeadlineAdapter(self._timeout[1]).mount(jira._session)
        # What get_server_info=True does: Cloud -> /search/jql, Data Center -> /search.
        info = jira.server_info()
        jira._version = tuple(info["versionNumbers"])
        jira.deploymentType = info.get("deploymentType")
        return jira
