"""A fake Jira (REST API v2) on 127.0.0.1, in a Cloud or a Data Center flavour.

Written from Atlassian's REST v2 reference: serverInfo (deploymentType tells the
client which search to use), field, myself, project (+ /statuses), issue create
and read (fields, expand=transitions), comments, transitions, and search:
Cloud serves `/search/jql` with a `nextPageToken` and answers the removed
`/search` with 410; Data Center serves `/search` with startAt/total and has no
`/search/jql`. Cloud's search index lags a create by `index_lag` seconds.
Errors have Jira's shape: `{"errorMessages": [...], "errors": {field: message}}`; a
description or comment over 32,767 characters (UTF-16 code units, as Java counts) is
refused (400), as Jira does.
Cloud signs in with Basic e-mail:API token, Data Center with `Bearer <PAT>`.
"""

from __future__ import annotations

import base64
import itertools
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from .jira_http import JiraHandler
from .jira_jql import JqlError, parse_jql

API = "/rest/api/2/"
# Jira's limit on a text field (a description, a comment), and what it answers past it.
TEXT_LIMIT = 32_767
TOO_LONG = "The entered text is too long. It exceeds the allowed limit of 32,767 characters."
STATUSES = {
    "To Do": "new",
    "In Progress": "indeterminate",
    "Approved": "indeterminate",
    "Done": "done",
}
# (id, name, to status) offered from every status but the target itself.
WORKFLOW = (
    ("11", "Start Progress", "In Progress"),
    ("21", "Approve", "Approved"),
    ("31", "Done", "Done"),
)
FIELDS = [
    {"id": "summary", "name": "Summary", "clauseNames": ["summary"]},
    {"id": "labels", "name": "Labels", "clauseNames": ["labels"]},
    {"id": "status", "name": "Status", "clauseNames": ["status"]},
    {"id": "comment", "name": "Comment", "clauseNames": ["comment"]},
    {"id": "description", "name": "Description", "clauseNames": ["description"]},
]


@dataclass
class Fault:
    """The next request matching (method, path suffix) fails; `after`: do it, then fail."""

    method: str
    path: str
    status: int = 503
    headers: dict[str, str] = field(default_factory=dict)
    after: bool = False
    drop: bool = False  # close the connection without an answer
    hold: threading.Event | None = None  # with after: done, answer held until this is set
    reached: threading.Event = field(default_factory=threading.Event)
    body: Any = None  # Jira's errorMessages for the status unless given


@dataclass
class Call:
    method: str
    path: str  # below /rest/api/2/
    query: dict[str, list[str]]
    body: Any
    at: float = field(default_factory=time.time)  # when it arrived (wall clock)


class FakeJira:
    """Projects, issues and a recorded list of every call; `with FakeJira() as jira:`."""

    def __init__(
        self,
        flavour: str = "cloud",
        *,
        projects: dict[str, list[str]] | None = None,
        email: str = "ops@example.com",
        token: str = "ATATT3xFfGF0-jira-api-token-s3cr3t",
        pat: str = "NjQ0-pat-s3cr3t-token",
        index_lag: float = 0.0,
        page_size: int = 50,
    ) -> None:
        self.flavour = flavour
        self.projects = projects or {"OPS": ["Task", "Bug"]}
        self.email, self.token, self.pat = email, token, pat
        self.index_lag = index_lag
        self.page_size = page_size
        self.workflow: dict[str, list[tuple[str, str, str]]] = {
            s: [t for t in WORKFLOW if t[2] != s] for s in STATUSES
        }
        self.issues: dict[str, dict[str, Any]] = {}
        self.denied: set[str] = set()  # permission keys the account lacks (mypermissions)
        self.calls: list[Call] = []
        self.faults: list[Fault] = []
        self._ids = itertools.count(10001)
        self._lock = threading.RLock()
        handler = type("Handler", (JiraHandler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # ---- lifecycle

    def __enter__(self) -> FakeJira:
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fake-jira"
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread:
            self._thread.join(5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # ---- what people do and see

    def move(self, key: str, status: str, by: str | None = "Alice Example") -> None:
        """A person moves the issue (changelog history without author when `by` is None)."""
        with self._lock:
            issue = self.issues[key]
            history: dict[str, Any] = {
                "id": str(next(self._ids)),
                "created": _now(),
                "items": [
                    {
                        "field": "status",
                        "fieldtype": "jira",
                        "fromString": issue["status"],
                        "toString": status,
                    }
                ],
            }
            if by is not None:
                history["author"] = {
                    "displayName": by,
                    "name": by.split()[0].lower(),
                    "accountId": "5b10a2844c20165700ede21g",
                }
            issue["changelog"].append(history)
            issue["status"] = status

    def issues_of(self, event_id: str) -> list[dict[str, Any]]:
        label = f"sebridge-{event_id.lower()}"
        with self._lock:
            return [i for i in self.issues.values() if label in i["labels"]]

    def comments(self, key: str) -> list[str]:
        with self._lock:
            return [c["body"] for c in self.issues[key]["comments"]]

    def calls_to(self, method: str, suffix: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method and c.path.endswith(suffix)]

    def fail(self, method: str, path: str, status: int = 503, **more: Any) -> Fault:
        fault = Fault(method, path, status, **more)
        with self._lock:
            self.faults.append(fault)
        return fault

    # ---- serving (called by the handler under the lock)

    def call_record(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> Call:
        return Call(method, path, query, body)

    def authorized(self, header: str) -> bool:
        if self.flavour == "cloud":
            basic = base64.b64encode(f"{self.email}:{self.token}".encode()).decode()
            return header == f"Basic {basic}"
        return header == f"Bearer {self.pat}"

    def take_fault(self, method: str, path: str) -> Fault | None:
        for fault in self.faults:
            if fault.method == method and path.endswith(fault.path):
                self.faults.remove(fault)
                return fault
        return None

    def handle(
        self, method: str, path: str, query: dict[str, list[str]], body: Any
    ) -> tuple[int, Any]:
        parts = path.split("/")
        one: dict[str, Any] = {k: v if k == "fields" else v[-1] for k, v in query.items()}
        if path == "serverInfo":
            cloud = self.flavour == "cloud"
            return 200, {
                "baseUrl": self.url,
                "version": "1001.0.0-SNAPSHOT" if cloud else "9.12.12",
                "versionNumbers": [1001, 0, 0] if cloud else [9, 12, 12],
                "deploymentType": "Cloud" if cloud else "Server",
                "serverTitle": "Jira",
            }
        if path == "field":
            return 200, FIELDS
        if path == "myself":
            return 200, {
                "accountId": "5b10ac8d82e05b22cc7d4ef5",
                "displayName": "sebridge bot",
                "name": "sebridge",
                "active": True,
            }
        if parts[0] == "project" and len(parts) >= 2:
            return self._project(parts[1], parts[2:])
        if path == "mypermissions":
            return self._permissions(one)
        if path == "search/jql":
            if self.flavour != "cloud":
                return 404, {"errorMessages": ["null for uri: /rest/api/2/search/jql"]}
            return self._search(body if method == "POST" else one, token=True)
        if path == "search":
            if self.flavour == "cloud":
                return 410, {
                    "errorMessages": [
                        "The requested API has been removed. Please migrate to the /rest/api/3/search/jql API. A full migration guideline is available at https://developer.atlassian.com/changelog/#CHANGE-2046"
                    ],
                    "errors": {},
                }
            return self._search(body if method == "POST" else one, token=False)
        if path == "issue" and method == "POST":
            return self._create(body)
        if parts[0] == "issue" and len(parts) >= 2:
            issue = self.issues.get(parts[1])
            if issue is None:
                return 404, {
                    "errorMessages": [
                        "Issue does not exist or you do not have permission to see it."
                    ],
                    "errors": {},
                }
            return self._issue(issue, method, parts[2:], one, body)
        return 404, {"errorMessages": [f"null for uri: {API}{path}"]}

    def _project(self, key: str, rest: list[str]) -> tuple[int, Any]:
        if key not in self.projects:
            return 404, {
                "errorMessages": [f"No project could be found with key '{key}'."],
                "errors": {},
            }
        types = [
            {"id": str(i), "name": n, "subtask": False}
            for i, n in enumerate(self.projects[key], 10001)
        ]
        if rest == ["statuses"]:
            statuses = [{"id": str(i), "name": s} for i, s in enumerate(STATUSES, 1)]
            return 200, [{**t, "statuses": statuses} for t in types]
        return 200, {"id": "10000", "key": key, "name": f"{key} project", "issueTypes": types}

    def _permissions(self, one: dict[str, Any]) -> tuple[int, Any]:
        """GET mypermissions: Cloud requires `permissions`; an unknown project is 404."""
        if self.flavour == "cloud" and not one.get("permissions"):
            return 400, {"errorMessages": ["The 'permissions' parameter is required."]}
        if one.get("projectKey") not in self.projects:
            return 404, {"errorMessages": ["No project could be found."], "errors": {}}
        keys = str(one.get("permissions") or "BROWSE_PROJECTS,CREATE_ISSUES").split(",")
        return 200, {
            "permissions": {
                k: {
                    "key": k,
                    "name": k.title().replace("_", " "),
                    "havePermission": k not in self.denied,
                }
                for k in keys
            }
        }

    def _create(self, body: dict[str, Any]) -> tuple[int, Any]:
        f = body.get("fields") or {}
        project = (f.get("project") or {}).get("key")
        errors: dict[str, str] = {}
        if project not in self.projects:
            errors["project"] = "valid project is required"
        elif (f.get("issuetype") or {}).get("name") not in self.projects[project]:
            errors["issuetype"] = "Specify a valid issue type"
        if java_length(f.get("description") or "") > TEXT_LIMIT:
            errors["description"] = TOO_LONG
        if not f.get("summary"):
            errors["summary"] = "You must specify a summary of the issue."
        elif java_length(f["summary"]) > 255 or "\n" in f["summary"]:
            errors["summary"] = "Summary must be less than 255 characters and a single line."
        for label in f.get("labels") or ():
            if " " in label or len(label) > 255:
                errors["labels"] = "The label must not contain spaces."
        if errors:
            return 400, {"errorMessages": [], "errors": errors}
        number = sum(1 for k in self.issues if k.startswith(f"{project}-")) + 1
        key, issue_id = f"{project}-{number}", str(next(self._ids))
        self.issues[key] = {
            "id": issue_id,
            "key": key,
            "project": project,
            "type": f["issuetype"]["name"],
            "summary": f["summary"],
            "description": f.get("description") or "",
            "labels": list(f.get("labels") or ()),
            "status": "To Do",
            "comments": [],
            "changelog": [],
            "created": time.monotonic(),
            "created_at": _now(),
        }
        return 201, {"id": issue_id, "key": key, "self": f"{self.url}{API}issue/{issue_id}"}

    def _issue(
        self, issue: dict[str, Any], method: str, rest: list[str], one: dict[str, Any], body: Any
    ) -> tuple[int, Any]:
        key = issue["key"]
        if rest == [] and method == "GET":
            wanted = one.get("fields") or ["*all"]
            return 200, self.issue_json(issue, wanted, one.get("expand", ""))
        if rest == ["comment"] and method == "GET":
            comments = issue["comments"]
            return 200, {
                "startAt": 0,
                "maxResults": 5000,
                "total": len(comments),
                "comments": comments,
            }
        if rest == ["comment"] and method == "POST":
            if not (body or {}).get("body"):
                return 400, {
                    "errorMessages": [],
                    "errors": {"comment": "Comment body can not be empty!"},
                }
            if java_length(body["body"]) > TEXT_LIMIT:
                return 400, {"errorMessages": [], "errors": {"comment": TOO_LONG}}
            return 201, self._add_comment(issue, body["body"])
        if rest == ["transitions"] and method == "GET":
            return 200, {"expand": "transitions", "transitions": self.transitions_of(issue)}
        if rest == ["transitions"] and method == "POST":
            wanted = str(((body or {}).get("transition") or {}).get("id", ""))
            match = [t for t in self.workflow[issue["status"]] if t[0] == wanted]
            if not match:
                return 400, {
                    "errorMessages": [f"Transition id '{wanted}' is not valid for this issue."],
                    "errors": {},
                }
            # No transition here has a screen: Jira answers 204 and silently drops a
            # comment sent with it (update.comment lands only through a screen).
            self.move(key, match[0][2], by="sebridge bot")
            return 204, None
        return 405, {
            "errorMessages": [f"{method} is not supported on issue/{key}/{'/'.join(rest)}"]
        }

    def _add_comment(self, issue: dict[str, Any], text: str) -> dict[str, Any]:
        comment = {
            "id": str(next(self._ids)),
            "body": text,
            "author": {"displayName": "sebridge bot"},
            "created": _now(),
        }
        issue["comments"].append(comment)
        return comment

    def transitions_of(self, issue: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {
                "id": i,
                "name": n,
                "hasScreen": False,
                "isGlobal": False,
                "to": {"name": to, "statusCategory": {"key": STATUSES[to]}},
            }
            for i, n, to in self.workflow[issue["status"]]
        ]

    def issue_json(self, issue: dict[str, Any], wanted: list[str], expand: str) -> dict[str, Any]:
        everything = {
            "summary": issue["summary"],
            "description": issue["description"],
            "labels": issue["labels"],
            "issuetype": {"name": issue["type"]},
            "project": {"key": issue["project"]},
            "status": {
                "name": issue["status"],
                "statusCategory": {"key": STATUSES.get(issue["status"], "new")},
            },
            "comment": {
                "startAt": 0,
                "maxResults": len(issue["comments"]),
                "total": len(issue["comments"]),
                "comments": issue["comments"],
            },
            "created": issue["created_at"],
        }
        fields = (
            everything if "*all" in wanted else {k: v for k, v in everything.items() if k in wanted}
        )
        out: dict[str, Any] = {
            "id": issue["id"],
            "key": issue["key"],
            "self": f"{self.url}{API}issue/{issue['id']}",
            "fields": fields,
        }
        if "transitions" in expand:
            out["transitions"] = self.transitions_of(issue)
        if "changelog" in expand:
            h = issue["changelog"]
            out["changelog"] = {"startAt": 0, "maxResults": len(h), "total": len(h), "histories": h}
        return out

    def _search(self, params: dict[str, Any], *, token: bool) -> tuple[int, Any]:
        try:
            match, descending = parse_jql(str(params.get("jql", "")))
        except JqlError as exc:
            return 400, {"errorMessages": [str(exc)], "errors": {}}
        for name in re.findall(r'project\s*=\s*"?([^"\s]+)', str(params.get("jql", ""))):
            if name not in self.projects:
                return 400, {
                    "errorMessages": [
                        f"The value '{name}' does not exist for the field 'project'."
                    ],
                    "errors": {},
                }
        now = time.monotonic()
        lag = self.index_lag if self.flavour == "cloud" else 0.0
        found = [i for i in self.issues.values() if now - i["created"] >= lag and match(i)]
        found.sort(key=lambda i: i["created"], reverse=descending)
        fields = params.get("fields") or ["id"]
        fields = fields.split(",") if isinstance(fields, str) else fields
        expand = params.get("expand") or ""
        size = min(int(params.get("maxResults") or self.page_size), self.page_size)
        start = int(params.get("nextPageToken" if token else "startAt") or 0)
        page = [self.issue_json(i, fields, expand) for i in found[start : start + size]]
        if token:
            more = start + size < len(found)
            return 200, {
                "issues": page,
                "isLast": not more,
                **({"nextPageToken": str(start + size)} if more else {}),
            }
        return 200, {"startAt": start, "maxResults": size, "total": len(found), "issues": page}


def java_length(text: str) -> int:
    """A text's length as Jira counts it: Java's String.length(), in UTF-16 code units."""
    return len(text.encode("utf-16-le", errors="surrogatepass")) // 2


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000+0000", time.gmtime())
