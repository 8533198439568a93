"""PostgreSQL for the tests: the machine's server on 127.0.0.1:5432 (trust auth; `.ci/run`
starts it when it is down), a database of our own per test module, and a wire tap that
counts the round trips a client makes.

Plain functions and classes only (bench/ uses them too); the fixtures built on them
(pg_database, pg_url, store_url) are in tests/conftest.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import getpass
import secrets
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg

HOST, PORT = "127.0.0.1", 5432
# Plain TCP: the wire tap reads the protocol (and the server is local anyway).
PLAIN = "sslmode=disable&gssencmode=disable"


def server_answers() -> bool:
    """Whether anything listens on 127.0.0.1:5432."""
    try:
        with socket.create_connection((HOST, PORT), timeout=3):
            return True
    except OSError:
        return False


def admin_url() -> str:
    """A superuser URL on the `test` database; skips when no server answers on 127.0.0.1:5432."""
    import pytest  # here: bench/ uses this module without pytest installed

    if not server_answers():
        pytest.skip(f"no PostgreSQL answers on {HOST}:{PORT} (.ci/run starts it)")
    errors = []
    for user in dict.fromkeys((getpass.getuser(), "root", "postgres")):
        url = f"postgresql://{user}@{HOST}:{PORT}/test?{PLAIN}"
        try:
            psycopg.connect(url, connect_timeout=5).close()
        except psycopg.Error as exc:
            errors.append(f"{user}: {' '.join(str(exc).split())}")
            continue
        return url
    pytest.fail(f"PostgreSQL on {HOST}:{PORT} answers but lets none of us in: {errors}")


@contextlib.contextmanager
def temporary_database(admin: str | None = None) -> Iterator[str]:
    """Create sebridge_test_<random>, yield its URL, drop it (with any session left on it).

    admin: a superuser URL of the server to use; default admin_url() (127.0.0.1:5432)."""
    admin = admin or admin_url()
    name = f"sebridge_test_{secrets.token_hex(4)}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield urlunsplit(urlsplit(admin)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def reset(url: str) -> str:
    """An empty database again: other sessions ended (their locks with them), schema dropped."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")
    return url


def query(url: str, sql: str) -> list[tuple[object, ...]]:
    """Read the store the way a person would: psql-like, a connection of its own."""
    with psycopg.connect(url, autocommit=True) as conn:
        return list(conn.execute(sql).fetchall())  # type: ignore[arg-type]


class RoundTripTap:
    """A TCP relay in front of the server that counts what clients ask of it.

    Every round trip a client makes ends with a Query ('Q', simple protocol) or a
    Sync ('S', extended protocol: Parse/Bind/Execute/Sync) message; the tap counts
    those, keeps the SQL text of Query and Parse messages (`sql`) and counts the round
    trips by the SQL they ran (`statements`, prepared statements included). Only
    what goes from clients to the server is parsed; the answers are relayed as is.

    upstream: the server's (host, port); default 127.0.0.1:5432.
    """

    def __init__(self, upstream: tuple[str, int] = (HOST, PORT)) -> None:
        self._upstream = upstream
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self.round_trips = 0
        self.sql: list[str] = []
        self.statements: Counter[str] = Counter()  # round trips by the SQL they ran
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = [self._server]
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, database_url: str) -> str:
        """database_url, reached through the tap."""
        host, port = self._upstream
        return database_url.replace(f"@{host}:{port}/", f"@127.0.0.1:{self.port}/")

    def statements_so_far(self) -> Counter[str]:
        """A copy of `statements`, safe while clients run."""
        with self._lock:
            return Counter(self.statements)

    def close(self) -> None:
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._upstream)
            for sock in (client, upstream):  # relayed writes go out at once, as the client's did
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sockets += [client, upstream]
            threading.Thread(target=self._relay, args=(upstream, client), daemon=True).start()
            threading.Thread(target=self._parse, args=(client, upstream), daemon=True).start()

    @staticmethod
    def _relay(source: socket.socket, target: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                target.sendall(data)
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)

    def _parse(self, client: socket.socket, upstream: socket.socket) -> None:
        """Relay what the client sends as it comes (one write per read, so the tap adds
        no delay); its complete messages are counted before they go on."""
        wire = _Client()
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                self._count(wire, data)
                upstream.sendall(data)
        with contextlib.suppress(OSError):
            upstream.shutdown(socket.SHUT_WR)

    def _count(self, wire: _Client, data: bytes) -> None:
        """Count the complete messages of one client's stream so far."""
        wire.buffer += data
        while not wire.started:  # SSL/GSS requests are followed by another start-up packet
            if len(wire.buffer) < 8:
                return
            (length,) = struct.unpack("!I", wire.buffer[:4])
            if len(wire.buffer) < length:
                return
            code = struct.unpack("!I", wire.buffer[4:8])[0]
            wire.buffer, wire.started = wire.buffer[length:], code not in (80877103, 80877104)
        while len(wire.buffer) >= 5:
            kind, (length,) = wire.buffer[:1], struct.unpack("!I", wire.buffer[1:5])
            if len(wire.buffer) < 1 + length:
                return
            body, wire.buffer = wire.buffer[5 : 1 + length], wire.buffer[1 + length :]
            with self._lock:
                if kind == b"Q":
                    wire.current = body.rstrip(b"\0").decode()
                    self.sql.append(wire.current)
                elif kind == b"P":
                    name, text = body.split(b"\0")[:2]
                    wire.prepared[name] = wire.current = text.decode()
                    self.sql.append(wire.current)
                elif kind == b"B":  # a prepared statement runs again: no Parse, no text
                    wire.current = wire.prepared.get(body.split(b"\0")[1], wire.current)
                if kind in (b"Q", b"S"):
                    self.round_trips += 1
                    self.statements[wire.current] += 1


@dataclasses.dataclass
class _Client:
    """What the tap knows of one client connection."""

    buffer: bytes = b""
    started: bool = False  # the untyped start-up packets are behind us
    prepared: dict[bytes, str] = dataclasses.field(default_factory=dict)  # name -> SQL
    current: str = ""  # the SQL of the round trip under way


class Relay:
    """A TCP relay in front of the server that can be cut (the database unreachable: every
    connection through it closed, new ones refused), made to hang (new connections are
    accepted and never answered, as through a host that drops packets), frozen (nothing
    moves either way on open connections, none is closed, new ones are never answered: a
    server that stopped, its sockets up) and restored."""

    def __init__(self, delay: float = 0.0) -> None:
        """delay: seconds each relayed chunk waits, either way (a slow network)."""
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._delay = delay
        self._cut = False
        self._hanging = False
        self._flowing = threading.Event()
        self._flowing.set()
        self._open: list[socket.socket] = []
        self._held: list[socket.socket] = []
        self.given_up = 0  # held connections their client closed (its connect timed out)
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def hang(self) -> None:
        """Close every relayed connection; accept new ones but never answer them."""
        self.cut()
        with self._lock:
            self._cut, self._hanging = False, True

    def freeze(self) -> None:
        """Stop relaying on every open connection without closing it; hold new ones."""
        with self._lock:
            self._flowing.clear()
            self._hanging = True

    def thaw(self) -> None:
        """Relay again what the frozen connections still carry (restore() closes the held
        new ones, whose clients then connect again)."""
        self.restore()

    def held(self) -> int:
        """Connections accepted while hanging whose client still waits for an answer."""
        with self._lock:
            return len(self._held) - self.given_up

    def url(self, database_url: str) -> str:
        """database_url, reached through the relay."""
        return database_url.replace(f"@{HOST}:{PORT}/", f"@127.0.0.1:{self.port}/")

    def cut(self) -> None:
        """Close every relayed connection and refuse new ones until restore()."""
        with self._lock:
            self._cut = True
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._open.clear()

    def restore(self) -> None:
        """Relay again (held connections are closed: their clients try again)."""
        with self._lock:
            self._cut = self._hanging = False
            self._flowing.set()
            for sock in self._held:
                with contextlib.suppress(OSError):  # wakes the thread reading it
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._held.clear()
            self.given_up = 0

    def close(self) -> None:
        self.restore()
        self.cut()
        self._server.close()

    def _hold(self, client: socket.socket) -> None:
        """Read and drop what the client sends until it gives up."""
        with contextlib.suppress(OSError):
            while client.recv(65536):
                pass
            with self._lock:
                if client in self._held:
                    self.given_up += 1

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            with self._lock:
                if self._cut:
                    client.close()
                    continue
                if self._hanging:
                    self._held.append(client)
                    threading.Thread(target=self._hold, args=(client,), daemon=True).start()
                    continue
                upstream = socket.create_connection((HOST, PORT))
                self._open += [client, upstream]
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        """Relay one direction; while frozen, read nothing and pass nothing on."""
        with contextlib.suppress(OSError):
            while self._flowing.wait() and (data := source.recv(65536)):
                self._flowing.wait()  # what was read as the freeze began waits too
                if self._delay:
                    time.sleep(self._delay)
                target.sendall(data)
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)
