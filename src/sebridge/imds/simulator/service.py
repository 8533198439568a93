"""Simulator: the fake IMDS as one object to start, script, inspect and stop.

with Simulator(port=0, clock=fake_clock) as sim:
    event_id = sim.schedule("Reboot", source="User")
    ...  # point a client at sim.url
    assert sim.start_requests == [event_id]
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from sebridge.imds.simulator.document import NEWEST
from sebridge.imds.simulator.faults import Fault, FaultQueue, RateLimiter, make_fault
from sebridge.imds.simulator.records import PostRecord, RequestRecord
from sebridge.imds.simulator.scenario import Scenario, read_scenario
from sebridge.imds.simulator.server import SimulatorHTTPServer
from sebridge.imds.simulator.spec import check_notice, parse_event
from sebridge.imds.simulator.state import SimulatorState

__all__ = ["Simulator"]


class Simulator:
    """An Azure IMDS Scheduled Events simulator serving HTTP on `host:port`.

    Args:
        port: 0 picks a free port; read the real one from `.port` / `.url` after start().
        time_scale: every duration passes this many times faster (900: 15 min in 1 s).
        clock: epoch seconds; inject a fake clock to drive lifecycles deterministically.
        terminate_notice: Terminate's notice, 300..900 s as on a scale set.
        approval_delay: nominal seconds from an accepted StartRequest to Started.
        rate_limit: requests per second answered before 429s (IMDS allows 5); None is off.
        log: receives one line per lifecycle change, approval and fault served.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        time_scale: float = 1.0,
        vm_name: str = "vm0",
        clock: Callable[[], float] = time.time,
        terminate_notice: float = 300,
        approval_delay: float = 2.0,
        rate_limit: int | None = None,
        log: Callable[[str], None] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        """Configure; nothing listens until start(). Raises ValueError on bad settings."""
        self.host = host
        self._port = port
        self._state = SimulatorState(
            vm_name=vm_name,
            time_scale=time_scale,
            terminate_notice=terminate_notice,
            approval_delay=approval_delay,
            clock=clock,
            log=log,
        )
        self._state.tags = dict(tags or {})
        self._faults = FaultQueue()
        self._limiter = RateLimiter(rate_limit) if rate_limit is not None else None
        self._server: SimulatorHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> Simulator:
        """Bind and serve in a daemon thread; returns self. Raises OSError if the port is taken."""
        if self._server is not None:
            raise RuntimeError("simulator already started")
        address = (self.host, self._port)
        server = SimulatorHTTPServer(address, self._state, self._faults, self._limiter)
        self._port = int(server.server_address[1])
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_until_stopped,
            name=f"sebridge-simulator:{self._port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, cut held requests short and close open connections. Idempotent."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None:
            return
        server.stop_serving()
        if thread is not None:
            thread.join(timeout=5)
        server.close_connections()
        server.server_close()

    def __enter__(self) -> Simulator:
        """Start on entering a `with` block."""
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Stop on leaving it."""
        self.stop()

    @property
    def port(self) -> int:
        """The listening port (the real one once started with port 0)."""
        return self._port

    @property
    def url(self) -> str:
        """Base URL, e.g. `http://127.0.0.1:8080`; IMDS paths go after it."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self._port}"

    # -- settings ----------------------------------------------------------------

    @property
    def vm_name(self) -> str:
        """The simulated VM's name (default Resources, compute `name`)."""
        return self._state.vm_name

    @property
    def tags(self) -> dict[str, str]:
        """The simulated VM's Azure tags, as instance metadata serves them."""
        return dict(self._state.tags)

    @tags.setter
    def tags(self, tags: Mapping[str, str]) -> None:
        self._state.tags = dict(tags)

    @property
    def time_scale(self) -> float:
        """How many times faster than real time durations pass."""
        return self._state.time_scale

    @property
    def clock(self) -> Callable[[], float]:
        """The clock the simulator reads."""
        return self._state.clock

    # -- scripting -----------------------------------------------------------------

    def schedule(
        self,
        event_type: str,
        *,
        source: str = "Platform",
        resources: list[str] | None = None,
        description: str | None = None,
        duration: int = -1,
        notice: float | None = None,
        status: str = "Scheduled",
        active: float | None = None,
        event_id: str | None = None,
        at: float = 0.0,
    ) -> str:
        """Create an event; returns its EventId. ValueError names a bad argument.

        Args:
            event_type: Freeze, Reboot, Redeploy, Preempt, Terminate, or anything else.
            resources: affected VMs; None means [vm_name].
            duration: DurationInSeconds (-1 = unknown), reported unscaled.
            notice: seconds to NotBefore; None means the documented minimum for the type.
            status: "Started" creates an unplanned event (host failure).
            active: seconds it stays Started; None means duration, else a per-type default.
            at: seconds from now until it appears.
        """
        raw: dict[str, object] = {
            "type": event_type,
            "source": source,
            "duration": duration,
            "status": status,
            "at": at,
        }
        optional = {
            "resources": resources,
            "description": description,
            "notice": notice,
            "active": active,
            "id": event_id,
        }
        raw.update({key: value for key, value in optional.items() if value is not None})
        return self._state.schedule(parse_event(raw, self._state.terminate_notice))

    def start_event(self, event_id: str) -> None:
        """Start an event now (KeyError if unknown)."""
        self._state.start_event(event_id)

    def complete(self, event_id: str) -> None:
        """Remove an event from the document now (KeyError if unknown)."""
        self._state.complete(event_id)

    def load_scenario(self, scenario: Scenario | str | os.PathLike[str]) -> list[str]:
        """Schedule a scenario's events at their offsets from now; returns their EventIds.

        Only the events are used: a scenario's settings (vm_name, time_scale, ...)
        are constructor arguments, see `Scenario.settings()`.
        """
        if not isinstance(scenario, Scenario):
            scenario = read_scenario(scenario)
        # Check against this simulator's terminate_notice before scheduling anything.
        for index, spec in enumerate(scenario.events):
            if spec.notice is not None and spec.status == "Scheduled":
                try:
                    check_notice(spec.event_type, spec.notice, self._state.terminate_notice)
                except ValueError as exc:
                    raise ValueError(
                        f"scenario {scenario.source}: events[{index}].notice: {exc}"
                    ) from None
        base = self._state.clock()
        return [self._state.schedule(spec, base=base) for spec in scenario.events]

    def inject(
        self,
        kind: str,
        count: int = 1,
        seconds: float | None = None,
        status: int | None = None,
        size: int | None = None,
    ) -> None:
        """Queue a fault for the next `count` /metadata/ requests it applies to.

        Args:
            kind: "500", "429", "status", "hang", "hang_after" (carried out, then held
                unanswered: a StartRequests POST is taken), "malformed", "html",
                "slow_first", "reset" or "oversized".
            seconds: how long "hang" or "hang_after" (default 30) or "slow_first"
                (default 5) holds a request.
            status: the HTTP status for kind "status".
            size: the answer's size for kind "oversized" (default 10 MiB): the document
                padded with spaces, valid JSON.
        """
        self._faults.push(make_fault(kind, count, seconds, status, size))

    def clear_faults(self) -> int:
        """Drop all queued faults; returns how many there were."""
        return self._faults.clear()

    # -- inspecting ------------------------------------------------------------------

    @property
    def faults(self) -> list[Fault]:
        """The faults still queued."""
        return self._faults.pending()

    @property
    def start_requests(self) -> list[str]:
        """EventIds accepted via POST, in order, repeats included."""
        return self._state.records.start_requests

    @property
    def posts(self) -> list[PostRecord]:
        """Every POST to /metadata/scheduledevents, accepted or not."""
        return self._state.records.posts

    @property
    def requests(self) -> list[RequestRecord]:
        """Every HTTP request received (method, path, client address, status)."""
        return self._state.records.requests

    @property
    def incarnation(self) -> int:
        """DocumentIncarnation now."""
        return self._state.incarnation

    def document(self, api_version: str = NEWEST) -> dict[str, Any]:
        """The document a GET with this api-version would return now."""
        return self._state.document(api_version)

    def event(self, event_id: str) -> dict[str, object]:
        """One event as the control API shows it (KeyError if unknown)."""
        return self._state.view(event_id)

    def snapshot(self) -> dict[str, Any]:
        """What GET /simulator/state returns (without the fault queue)."""
        return self._state.snapshot()

    def refresh(self) -> None:
        """Evaluate lifecycles now, logging changes (serve() calls this periodically)."""
        self._state.refresh()
