"""Every deadline of a PostgreSQL session: the server's, TCP's, and the client's own.

connect_options(): the server ends a statement after STATEMENT_TIMEOUT and a
wait for another agent's row lock after 5 s, and a session idle inside a
transaction (its agent frozen or cut off mid-transaction) after 30 s, so its
row locks do not hold the fleet up; TCP fails unacknowledged data after 10 s
and notices a vanished idle peer within about 15 s. JIT is off: compiling
took 0.5 s of a claim whose plan looked costly and ran in 1 ms.

BoundedConnection: the server's statement_timeout ends a statement that runs
too long, and tcp_user_timeout a connection whose packets go unacknowledged.
Neither helps when the server (or something in between) stops answering while
the connection stays up: a stopped postgres process, a frozen proxy, a VM
paused mid-migration. Their kernels still acknowledge what we send, so the
statement would wait for an answer forever. So the client waits for each
answer at most `deadline` seconds (DEADLINE_SECONDS: somewhat longer than
statement_timeout, so a server that answers says so itself first), on the
waiting thread itself: psycopg's wait takes a timeout. Past it the connection
is closed and the statement fails; the pool opens another (store/postgres.py).
A frozen server holds up the threads that wait on it, each for its deadline,
never the others (docs/ARCHITECTURE.md, "Guarantees").
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

__all__ = [
    "DEADLINE_SECONDS",
    "MIGRATION_SECONDS",
    "STATEMENT_TIMEOUT",
    "BoundedConnection",
    "connect_options",
]

STATEMENT_TIMEOUT = 10.0
# The client's own deadline: past it, the server is taken for frozen.
DEADLINE_SECONDS = STATEMENT_TIMEOUT + 2.0
# A migration's statements (agents starting at once wait for each other's).
MIGRATION_SECONDS = 120.0
# libpq's TCP settings; store.url may override each.
_DEAD_PEER = {
    "tcp_user_timeout": 10000,
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 5,
}
_SESSION = (
    f"-c statement_timeout={int(STATEMENT_TIMEOUT * 1000)} -c lock_timeout=5000 "
    "-c idle_in_transaction_session_timeout=30000 -c jit=off"
)


def connect_options(url: str) -> dict[str, Any]:
    """psycopg.connect()'s keyword arguments for `url`: autocommit, our deadlines, and
    whatever the URL sets itself (it wins, its `options` after ours)."""
    given = conninfo_to_dict(url)
    options: dict[str, Any] = {
        "autocommit": True,
        "connect_timeout": given.get("connect_timeout", 10),
        "application_name": given.get("application_name", "sebridge"),
    }
    for key, value in _DEAD_PEER.items():
        options[key] = given.get(key, value)
    options["options"] = f"{_SESSION} {given.get('options', '')}".strip()
    return options


class BoundedConnection(psycopg.Connection[Any]):
    """A connection whose every wait for the server ends after `deadline` seconds
    (DEADLINE_SECONDS unless set: a migration's are longer). Past it, the connection is
    closed (its state is unknown: an answer may still be on its way) and the statement
    fails with `timed_out` set."""

    deadline: float | None = None
    timed_out = False

    def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        """psycopg's wait for one operation, bounded by the deadline."""
        if timeout is None:
            timeout = self.deadline if self.deadline is not None else DEADLINE_SECONDS
        try:
            return super().wait(gen, interval, timeout)
        except psycopg.errors._WaitTimeout:  # the server is taken for frozen
            self.timed_out = True
            self.close()
            raise psycopg.OperationalError(f"no answer within {timeout:g} s") from None
