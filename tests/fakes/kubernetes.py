"""A fake Kubernetes API server on 127.0.0.1, over HTTPS, that grants what the shipped RBAC grants.

TLS with a CA made here by the `openssl` CLI (as a cluster's CA signs its API
server's certificate; the client checks it against the CA file, as in a pod). Every
request must carry the service account's bearer token (else 401). Each is then
authorized as Kubernetes' RBAC would, from deploy/kubernetes/rbac.yaml itself: its
ClusterRoles through their ClusterRoleBindings, its Roles through RoleBindings, for
the ServiceAccount of that file in kustomization.yaml's namespace; what they do not
grant is refused (403) and kept in `refused`. SelfSubjectAccessReview is allowed to
every account, as Kubernetes' system:basic-user does.

It holds nodes (`add_node`) and Events. Creating an Event whose name exists answers
409 AlreadyExists; an Event about a Node outside "default" is refused (422) as the
API server's validation does. PATCH nodes/<n>/status merges `status.conditions` by
type (strategic merge) and honours a resourceVersion in the patch (409 Conflict when
it is stale); every change bumps the node's resourceVersion (`stale_patches` does just before a
patch, as the kubelet's own status updates do). The next request can be made to answer a status
(`fail_next`) or to hang (`hold_next`).
"""

from __future__ import annotations

import json
import re
import secrets
import ssl
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

ROOT = Path(__file__).resolve().parent.parent.parent
KUSTOMIZE_DIR = ROOT / "deploy" / "kubernetes"
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_VERBS = {"POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}


_TLS: list[tuple[Path, Path, Path]] = []  # made once per test process (RSA keys take time)


def make_tls() -> tuple[Path, Path, Path]:
    """(CA certificate, server certificate, server key) for 127.0.0.1, made by openssl."""
    if _TLS:
        return _TLS[0]
    folder = Path(tempfile.mkdtemp(prefix="fake-kubernetes-tls-"))
    ca_key, ca, key, csr, cert = (
        folder / n for n in ("ca.key", "ca.crt", "s.key", "s.csr", "s.crt")
    )
    ext = folder / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca),
        "-days", "2", "-subj", "/CN=fake-kubernetes-ca")  # fmt: skip
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
        "-subj", "/CN=kube-apiserver")  # fmt: skip
    run("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
        "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(ext))  # fmt: skip
    _TLS.append((ca, cert, key))
    return ca, cert, key


@dataclass(frozen=True)
class Rule:
    groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    names: tuple[str, ...] = ()

    def allows(self, verb: str, group: str, resource: str, name: str) -> bool:
        return (
            any(g in ("*", group) for g in self.groups)
            and any(r in ("*", resource) for r in self.resources)
            and any(v in ("*", verb) for v in self.verbs)
            and (not self.names or name in self.names)
        )


def shipped_rbac() -> tuple[str, list[tuple[str, Rule]]]:
    """The ServiceAccount's user name, and (namespace or "" for everywhere, rule) for each
    rule bound to it by deploy/kubernetes/rbac.yaml."""
    namespace = yaml.safe_load((KUSTOMIZE_DIR / "namespace.transformer.yaml").read_text())
    default_ns = namespace["metadata"]["namespace"]
    docs = [d for d in yaml.safe_load_all((KUSTOMIZE_DIR / "rbac.yaml").read_text()) if d]
    (account,) = [d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount"]
    by_name = {(d["kind"], d["metadata"]["name"]): d for d in docs if "Role" in d["kind"]}
    granted: list[tuple[str, Rule]] = []
    for binding in docs:
        if binding["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        ours = {"kind": "ServiceAccount", "name": account, "namespace": default_ns}
        if ours not in binding["subjects"]:
            continue
        role = by_name[(binding["roleRef"]["kind"], binding["roleRef"]["name"])]
        where = (
            binding["metadata"].get("namespace", default_ns)
            if binding["kind"] == "RoleBinding"
            else ""
        )
        for r in role["rules"]:
            rule = Rule(tuple(r["apiGroups"]), tuple(r["resources"]), tuple(r["verbs"]),
                        tuple(r.get("resourceNames", ())))  # fmt: skip
            granted.append((where, rule))
    return f"system:serviceaccount:{default_ns}:{account}", granted


@dataclass
class _Answer:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    hold: threading.Event | None = None


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    verb: str
    body: Any


class FakeKubernetes:
    """`with FakeKubernetes() as api:`; `api.server`, `api.token_file`, `api.ca_file`."""

    def __init__(self) -> None:
        self.token = "eyJ" + secrets.token_urlsafe(40)
        self._folder = Path(tempfile.mkdtemp(prefix="fake-kubernetes-"))
        self.token_file = self._folder / "token"  # as the kubelet mounts it: a trailing newline
        self.token_file.write_text(self.token + "\n")
        ca, cert, key = make_tls()
        self.ca_file = ca
        self.user, self.rules = shipped_rbac()
        self.nodes: dict[str, dict[str, Any]] = {}
        self.events: dict[tuple[str, str], dict[str, Any]] = {}
        self.requests: list[Request] = []
        self.refused: list[str] = []
        self.stale_patches = 0  # status patches to answer 409 (the node changed just before)
        self._next: list[_Answer] = []
        self._version = 100
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                fake._handle(self)

            do_POST = do_PATCH = do_PUT = do_DELETE = do_GET

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fake-kubernetes", daemon=True
        )

    def __enter__(self) -> FakeKubernetes:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            for answer in self._next:
                if answer.hold is not None:
                    answer.hold.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def add_node(self, name: str, provider_id: str) -> dict[str, Any]:
        with self._lock:
            node = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "uid": secrets.token_hex(8), "resourceVersion": ""},
                "spec": {"providerID": provider_id},
                "status": {
                    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
                },
            }
            self._bump(node)
            self.nodes[name] = node
            return node

    def condition(self, name: str, type_: str) -> dict[str, Any] | None:
        conditions = self.nodes[name]["status"]["conditions"]
        return next((c for c in conditions if c["type"] == type_), None)

    def fail_next(self, status: int, *, retry_after: float | None = None, body: Any = None) -> None:
        headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
        with self._lock:
            self._next.append(_Answer(status, body, headers))

    def hold_next(self) -> threading.Event:
        release = threading.Event()
        with self._lock:
            self._next.append(_Answer(0, hold=release))
        return release

    def allowed(self, verb: str, group: str, resource: str, namespace: str, name: str) -> bool:
        return any(
            (where in ("", namespace)) and rule.allows(verb, group, resource, name)
            for where, rule in self.rules
        )

    # -- the server --------------------------------------------------------------------------

    def _handle(self, request: BaseHTTPRequestHandler) -> None:
        raw = request.rfile.read(int(request.headers.get("Content-Length") or 0))
        body = json.loads(raw) if raw else None
        with self._lock:
            answer = self._answer(request, body)
        if answer.hold is not None:
            answer.hold.wait(30)
            answer = _Answer(500, _status(500, "InternalError", "held"))
        data = json.dumps(answer.body).encode() if answer.body is not None else b""
        try:
            request.send_response(answer.status)
            headers = {"Content-Type": "application/json", "Content-Length": str(len(data))}
            for key, value in {**headers, **answer.headers}.items():
                request.send_header(key, value)
            request.end_headers()
            request.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            request.close_connection = True

    def _answer(self, request: BaseHTTPRequestHandler, body: Any) -> _Answer:
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return _Answer(401, _status(401, "Unauthorized", "Unauthorized"))
        parts = urlsplit(request.path)
        segments = [s for s in parts.path.split("/") if s]
        if segments[:1] == ["api"]:
            group, rest = "", segments[2:]
        elif segments[:1] == ["apis"]:
            group, rest = segments[1], segments[3:]
        else:
            return _Answer(404, _status(404, "NotFound", "the server could not find it"))
        namespace = ""
        if rest[:1] == ["namespaces"] and len(rest) > 2:
            namespace, rest = rest[1], rest[2:]
        resource, name = rest[0], rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        verb = _VERBS.get(request.command) or ("get" if name else "list")
        self.requests.append(Request(request.command, request.path, verb, body))
        if self._next:
            return self._next.pop(0)
        if (group, resource) == ("authorization.k8s.io", "selfsubjectaccessreviews"):
            return self._review(body)
        full = f"{resource}/{sub}" if sub else resource
        if not self.allowed(verb, group, full, namespace, name):
            self.refused.append(f"{verb} {full} {namespace}/{name}")
            message = f'{full} is forbidden: User "{self.user}" cannot {verb} resource "{full}"'
            return _Answer(403, _status(403, "Forbidden", message))
        if (group, resource) == ("", "nodes"):
            return self._nodes(verb, name, sub, body)
        if (group, resource) == ("", "events") and verb == "create":
            return self._create_event(namespace, body)
        return _Answer(404, _status(404, "NotFound", f"{full} not served here"))

    def _review(self, body: Any) -> _Answer:
        a = body["spec"]["resourceAttributes"]
        full = a["resource"] + (f"/{a['subresource']}" if a.get("subresource") else "")
        allowed = self.allowed(
            a["verb"], a["group"], full, a.get("namespace", ""), a.get("name", "")
        )
        return _Answer(201, {**body, "status": {"allowed": allowed}})

    def _nodes(self, verb: str, name: str, sub: str, body: Any) -> _Answer:
        if verb == "list":
            return _Answer(200, {"kind": "NodeList", "items": list(self.nodes.values())})
        node = self.nodes.get(name)
        if node is None:
            return _Answer(404, _status(404, "NotFound", f'nodes "{name}" not found'))
        if verb == "get":
            return _Answer(200, node)
        if verb == "patch" and sub == "status":
            if self.stale_patches:  # the kubelet wrote the node's status in between
                self.stale_patches -= 1
                self._bump(node)
            wanted = (body.get("metadata") or {}).get("resourceVersion")
            if wanted and wanted != node["metadata"]["resourceVersion"]:
                return _Answer(409, _status(409, "Conflict", "the object has been modified"))
            conditions = node["status"]["conditions"]
            for new in body["status"]["conditions"]:
                kept = [c for c in conditions if c["type"] != new["type"]]
                conditions[:] = [*kept, new]
            self._bump(node)
            return _Answer(200, node)
        return _Answer(405, _status(405, "MethodNotAllowed", "not served here"))

    def _create_event(self, namespace: str, event: Any) -> _Answer:
        name = event["metadata"]["name"]
        involved = event["involvedObject"]
        if not _DNS_SUBDOMAIN.fullmatch(name) or len(name) > 253:
            return _Answer(422, _status(422, "Invalid", f"metadata.name: Invalid value: {name!r}"))
        if involved["kind"] == "Node" and namespace != "default":
            return _Answer(422, _status(422, "Invalid", "involvedObject.namespace: does not match"))
        if (namespace, name) in self.events:
            return _Answer(409, _status(409, "AlreadyExists", f'events "{name}" already exists'))
        self.events[(namespace, name)] = event
        return _Answer(201, event)

    def _bump(self, node: dict[str, Any]) -> None:
        self._version += 1
        node["metadata"]["resourceVersion"] = str(self._version)


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
            "reason": reason, "code": code}  # fmt: skip
