"""PostgreSQL for the tests: the machine's server on 127.0.0.1:5432 (trust auth; `.ci/run`
starts it when it is down), a database of our own per test module, and a wire tap that
counts the round trips a client makes.

Plain functions and classes only (no fixtures): each test module owns its fixtures.
"""

from __future__ import annotations

import contextlib
import getpass
import secrets
import socket
import struct
import threading
from collections.abc import Iterator

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
def temporary_database() -> Iterator[str]:
    """Create sebridge_test_<random>, yield its URL, drop it (with any session left on it)."""
    admin = admin_url()
    name = f"sebridge_test_{secrets.token_hex(4)}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield admin.replace("/test?", f"/{name}?")
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
    those and keeps the SQL text of Query and Parse messages, per connection. Only
    what goes from clients to the server is parsed; the answers are relayed as is.
    """

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self.round_trips = 0
        self.sql: list[str] = []
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = [self._server]
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, database_url: str) -> str:
        """database_url, reached through the tap."""
        return database_url.replace(f"@{HOST}:{PORT}/", f"@127.0.0.1:{self.port}/")

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
            upstream = socket.create_connection((HOST, PORT))
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
        buffer = b""

        def read(n: int) -> bytes:
            nonlocal buffer
            while len(buffer) < n:
                data = client.recv(65536)
                if not data:
                    raise EOFError
                buffer += data
            chunk, buffer = buffer[:n], buffer[n:]
            upstream.sendall(chunk)
            return chunk

        with contextlib.suppress(OSError, EOFError):
            while True:  # untyped start-up packets; SSL/GSS requests are followed by another
                (length,) = struct.unpack("!I", read(4))
                body = read(length - 4)
                if struct.unpack("!I", body[:4])[0] not in (80877103, 80877104):
                    break
            while True:
                kind = read(1)
                (length,) = struct.unpack("!I", read(4))
                body = read(length - 4)
                with self._lock:
                    if kind in (b"Q", b"S"):
                        self.round_trips += 1
                    if kind == b"Q":
                        self.sql.append(body.rstrip(b"\0").decode())
                    elif kind == b"P":
                        self.sql.append(body.split(b"\0")[1].decode())
        with contextlib.suppress(OSError):
            upstream.shutdown(socket.SHUT_WR)


class Relay:
    """A TCP relay in front of the server that can be cut (the database unreachable: every
    connection through it closed, new ones refused), made to hang (new connections are
    accepted and never answered, as through a host that drops packets) and restored."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._cut = False
        self._hanging = False
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
                threading.Thread(
                    target=RoundTripTap._relay, args=(source, target), daemon=True
                ).start()
