"""The control API under `/simulator/`, a path IMDS never uses: JSON in and out, snake_case.

    GET    /simulator/state                  incarnation, events, start_requests, posts, faults
    POST   /simulator/events                 {"type", "source"?, ...} -> 201 with the event
    POST   /simulator/events/{id}/start      start it now -> 200 with the event
    POST   /simulator/events/{id}/complete   remove it now -> 200 with the event
    GET    /simulator/faults                 the queued faults
    POST   /simulator/faults                 {"kind", "count"?, "seconds"?, "status"?} -> 201
    DELETE /simulator/faults                 clear them -> 200 {"cleared": n}

Kept free of HTTP plumbing: `handle_control` maps (method, path, body) to
(status, JSON value), so the server only moves bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from sebridge.imds.simulator.faults import FaultQueue, make_fault
from sebridge.imds.simulator.spec import parse_event
from sebridge.imds.simulator.state import SimulatorState

__all__ = ["PREFIX", "handle_control"]

PREFIX = "/simulator/"
_FAULT_KEYS = ("kind", "count", "seconds", "status", "size")

Reply = tuple[int, Any]


def _error(status: int, message: str) -> Reply:
    return status, {"error": message}


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body.decode("utf-8") or "{}")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError("body must be a JSON object")
    return data


def _create_event(state: SimulatorState, body: bytes) -> Reply:
    try:
        spec = parse_event(_json_object(body), state.terminate_notice)
        event_id = state.schedule(spec)
    except ValueError as exc:
        return _error(400, str(exc))
    return 201, state.view(event_id)


def _act_on_event(state: SimulatorState, event_id: str, action: str) -> Reply:
    try:
        if action == "start":
            state.start_event(event_id)
        else:
            state.complete(event_id)
        return 200, state.view(event_id)
    except KeyError:
        return _error(404, f"no event with id {event_id}")


def _faults_json(faults: FaultQueue) -> list[dict[str, Any]]:
    return [asdict(fault) for fault in faults.pending()]


def _add_fault(faults: FaultQueue, body: bytes) -> Reply:
    try:
        data = _json_object(body)
        unknown = sorted(set(data) - set(_FAULT_KEYS))
        if unknown:
            raise ValueError(f"{unknown[0]}: unknown key; expected one of {', '.join(_FAULT_KEYS)}")
        fault = make_fault(
            data.get("kind", ""),
            data.get("count", 1),
            data.get("seconds"),
            data.get("status"),
            data.get("size"),
        )
    except ValueError as exc:
        return _error(400, str(exc))
    faults.push(fault)
    return 201, asdict(fault)


def handle_control(
    method: str, path: str, body: bytes, state: SimulatorState, faults: FaultQueue
) -> Reply:
    """Answer one control API request: (HTTP status, JSON-serializable value)."""
    parts = tuple(path[len(PREFIX) :].strip("/").split("/"))
    actions: dict[str, Callable[[], Reply]]
    if parts == ("state",):
        actions = {"GET": lambda: (200, state.snapshot() | {"faults": _faults_json(faults)})}
    elif parts == ("events",):
        actions = {"POST": lambda: _create_event(state, body)}
    elif len(parts) == 3 and parts[0] == "events" and parts[2] in ("start", "complete"):
        actions = {"POST": lambda: _act_on_event(state, parts[1], parts[2])}
    elif parts == ("faults",):
        actions = {
            "GET": lambda: (200, _faults_json(faults)),
            "POST": lambda: _add_fault(faults, body),
            "DELETE": lambda: (200, {"cleared": faults.clear()}),
        }
    else:
        return _error(404, f"no control endpoint {path}")
    action = actions.get(method)
    if action is None:
        return _error(405, f"{path} takes {' or '.join(actions)}")
    return action()
