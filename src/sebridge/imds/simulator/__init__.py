"""A fake Azure IMDS Scheduled Events service, written from Microsoft's documentation alone.

It shares no code with sebridge's IMDS client, so one misreading of the docs
cannot hide in both. Users test their drain logic against it
(`sebridge simulate`); sebridge's tests use it as their main fixture.

Modules: `events` (one event's lifecycle), `document` (wire format by
api-version), `state` (the world, evaluated lazily from a clock), `faults`,
`control` (the /simulator/ API), `server` (HTTP), `service` (`Simulator`),
`spec` and `scenario` (validated input), `serve` (the blocking entry point).
"""

from sebridge.imds.simulator.document import API_VERSIONS
from sebridge.imds.simulator.faults import FAULT_KINDS, Fault
from sebridge.imds.simulator.records import PostRecord, RequestRecord
from sebridge.imds.simulator.scenario import Scenario, demo_scenario, parse_scenario, read_scenario
from sebridge.imds.simulator.serve import serve
from sebridge.imds.simulator.service import Simulator

__all__ = [
    "API_VERSIONS",
    "FAULT_KINDS",
    "Fault",
    "PostRecord",
    "RequestRecord",
    "Scenario",
    "Simulator",
    "demo_scenario",
    "parse_scenario",
    "read_scenario",
    "serve",
]
