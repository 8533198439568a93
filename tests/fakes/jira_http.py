"""The HTTP side of the fake Jira: REST v2 paths, JSON bodies, Basic or Bearer sign-in, faults.

Every request is recorded, then a queued fault (if one matches) answers instead of Jira,
or after Jira did the work (a lost answer), or holds the answer (the client may be killed
meanwhile); otherwise `FakeJira.handle` answers. Connections are kept alive (HTTP/1.1).
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:
    from .jira import FakeJira

API = "/rest/api/2/"


class JiraHandler(BaseHTTPRequestHandler):
    """One request to the fake Jira."""

    fake: FakeJira
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _serve(self) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            self._answer(400, {"errorMessages": ["Unexpected character in the request body"]})
            return
        if not url.path.startswith(API):
            self._answer(404, {"errorMessages": ["not a REST v2 path"]})
            return
        path = url.path[len(API) :].strip("/")
        query = {
            k: ",".join(v).split(",") if k == "fields" else v
            for k, v in parse_qs(url.query).items()
        }
        fake = self.fake
        with fake._lock:
            fake.calls.append(fake.call_record(self.command, path, query, body))
            fault = fake.take_fault(self.command, path)
            if fault and fault.drop and not fault.after:
                self.close_connection = True
                return
            if not fake.authorized(self.headers.get("Authorization", "")):
                status, answer = (
                    401,
                    {
                        "errorMessages": [
                            "You are not authenticated. Authentication required to perform this operation."
                        ],
                        "errors": {},
                    },
                )
            elif fault and not fault.after:
                status, answer = fault.status, fault.body or _fault_body(fault.status)
            else:
                status, answer = fake.handle(self.command, path, query, body)
                if fault:  # it happened; the answer is lost
                    if fault.drop:
                        self.close_connection = True
                        return
                    status, answer = fault.status, fault.body or _fault_body(fault.status)
        if fault and fault.hold is not None:
            fault.reached.set()  # done, not answered: the client may be killed now
            fault.hold.wait(30)
        self._answer(status, answer, fault.headers if fault else {})

    do_GET = do_POST = do_PUT = do_DELETE = _serve

    def _answer(self, status: int, answer: Any, headers: dict[str, str] | None = None) -> None:
        data = b"" if answer is None else json.dumps(answer).encode()
        self.send_response(status)
        if data:
            self.send_header("Content-Type", "application/json;charset=UTF-8")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _fault_body(status: int) -> Any:
    if status == 429:
        return {"errorMessages": ["Rate limit exceeded."]}
    if status >= 500:
        return None
    return {"errorMessages": [f"HTTP {status}"], "errors": {}}
