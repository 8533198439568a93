"""The HTTP server's door: accepts every connection, sends probes one way, the rest another.

Waitress's loop accepts and reads connections in the order they came, on one thread,
with Python's cost per connection: about 250 µs each on a busy 2-core machine. A crowd
of a thousand scrapes of /metrics therefore held a /healthz probe that came just after
it, first in the kernel's accept queue and then in the loop's pass over the crowd, for
a quarter to half a second (bench/metrics_storm.py), where an orchestrator gives up
after one. Queueing the probe first for waitress's threads (web/probes_first.py) cannot
help before its request has been read.

Here the `http-door` thread does the accepting. It looks at what each new connection
has sent (a peek: nothing is read) and hands a whole probe request to the probe desk
(web/probe_desk.py), which answers it; every other connection is handed to waitress's
loop, a batch at a time, as if waitress had accepted it (DeadlineServer.adopt). A
connection costs the door an accept and a peek, a few µs, so a probe waits for the
crowd's accepting, not for its reading and answering (and the door accepts what waits
before handing any of it over: BATCH). If the door's thread has
ended, waitress's loop accepts again by itself (DeadlineServer.readable).
See docs/ARCHITECTURE.md, "Threads".
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import select
import socket
import threading
import time
from typing import Any

from sebridge.web.deadlines import DeadlineServer
from sebridge.web.probe_desk import PEEK, ProbeDesk, probe_request

__all__ = ["Door"]

log = logging.getLogger(__name__)

# Connections accepted before the loop is handed them (one wake-up of the loop). What waits
# is accepted first, then handed over: while waitress reads a crowd, its threads want the
# interpreter's lock at every turn and the door's accepts slow down many times over (11 µs
# an accept alone, about 0.4 ms each beside a crowd being read), so a probe behind a crowd
# is reached sooner when the crowd is accepted before it is read. A flood of connections
# still reaches waitress every BATCH.
BATCH = 1024
PAUSE = 50  # ms the door waits when it cannot accept (the server's hard cap, no descriptors)
SHORT_SAID_EVERY = 60.0  # seconds between two warnings that accepting fails
# Out of descriptors or memory: accepting again at once would fail the same way.
_SHORT_OF = frozenset((errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM))


class Door:
    """Accepts `server`'s connections on the `http-door` thread; probes go to `desk`."""

    def __init__(self, server: DeadlineServer, desk: ProbeDesk) -> None:
        self._server = server
        self._listener: socket.socket = server.socket
        self._desk = desk
        self._wake_read, self._wake_write = os.pipe()
        self._woken = select.poll()  # the wake-up pipe alone: pauses that stop() ends
        self._woken.register(self._wake_read, select.POLLIN)
        self._stopping = False
        self._accepting = False
        self._short_said = float("-inf")
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._accepting = True
        self._thread = threading.Thread(target=self._run, name="http-door", daemon=True)
        self._thread.start()

    def open(self) -> bool:
        """Whether the door accepts; when not, waitress's loop must."""
        return self._accepting

    def stop(self) -> None:
        """Stop accepting (what the kernel still holds stays there); the listening socket
        is left to the server, which closes it."""
        self._stopping = True
        os.write(self._wake_write, b"x")
        thread = self._thread
        if thread is not None:
            thread.join(5)
        if thread is None or not thread.is_alive():
            os.close(self._wake_read)
            os.close(self._wake_write)

    def _run(self) -> None:
        waiting = select.poll()
        waiting.register(self._wake_read, select.POLLIN)
        waiting.register(self._listener, select.POLLIN)
        try:
            while not self._stopping:
                if self._server.crowded():
                    # Let the kernel's queue hold the next ones until some have gone.
                    self._woken.poll(PAUSE)
                elif waiting.poll() and not self._stopping:
                    self._let_in()
        except Exception:  # a bug here must not end accepting: waitress's loop takes over
            log.exception("the HTTP server's door failed; waitress accepts by itself")
        finally:
            self._accepting = False
            if not self._stopping:
                self._server.trigger.pull_trigger()  # its loop looks at the listener again

    def _let_in(self) -> None:
        """Accept what waits (up to BATCH): each probe to the desk, the rest to waitress."""
        batch: list[tuple[socket.socket, Any]] = []
        try:
            for _ in range(BATCH):
                try:
                    connection, address = self._listener.accept()
                except (BlockingIOError, InterruptedError):
                    break
                except OSError as exc:
                    if exc.errno in _SHORT_OF:
                        self._short_of(exc)
                        break
                    continue  # the client gave up before it was accepted
                try:  # two system calls a connection in all: each may wait for the GIL
                    head = connection.recv(PEEK, socket.MSG_PEEK | socket.MSG_DONTWAIT)
                except OSError:
                    head = b""
                request = probe_request(head)
                if request is None:
                    batch.append((connection, address))
                else:
                    self._desk.take(connection, request)
        finally:
            if batch:
                self._server.trigger.pull_trigger(functools.partial(self._server.adopt, batch))

    def _short_of(self, exc: OSError) -> None:
        """Said at most once a SHORT_SAID_EVERY; then a pause, not a spin."""
        now = time.monotonic()
        if now - self._short_said >= SHORT_SAID_EVERY:
            self._short_said = now
            log.warning("cannot accept HTTP connections: %s", exc.strerror)
        self._woken.poll(PAUSE)
