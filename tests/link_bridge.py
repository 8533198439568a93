"""A daemon in this process that polls the IMDS simulator on a thread and serves /approve/:
the fixture of the approval link, Teams end-to-end and browser tests."""

from __future__ import annotations

from typing import Any

import requests

from helpers import RunnerThread, wait_until
from sebridge.cli.link_keys import link_signer
from sebridge.cli.runtime import build_runner
from sebridge.config.loader import Config
from sebridge.imds.simulator import Simulator
from sebridge.integrations.registry import config_from_mapping as from_mapping
from sebridge.web.links import LinkSigner
from sebridge.web.server import HttpServer

PUBLIC = "https://sebridge.example.net"  # what a TLS proxy in front would be reached at
POLL = 0.2


class LinkBridge:
    """The daemon (public_url = PUBLIC, listening on a free local port) and an HTTP client.

    Args:
        sections: more config sections (e.g. {"teams": {...}}).
        vm_name: the agent's VM; store_url: its store (default: SQLite in tmp_path), an
            agent of a fleet when several bridges share one PostgreSQL database.
    """

    def __init__(
        self,
        sim: Simulator,
        tmp_path: Any,
        sections: dict[str, Any] | None = None,
        *,
        vm_name: str = "vm0",
        store_url: str = "",
        **http: Any,
    ) -> None:
        self.sim = sim
        self.config: Config = from_mapping(
            {
                "imds": {"endpoint": sim.url, "poll_interval": POLL, "vm_name": vm_name},
                "store": {"url": store_url or f"sqlite:///{tmp_path / 'state.db'}"},
                "console": {"enabled": False},
                "jsonl": {"path": str(tmp_path / "events.jsonl")},
                "http": {"listen": "127.0.0.1:0", "public_url": PUBLIC, **http},
                "dispatch": {"shutdown_grace_seconds": 1.0},
                **(sections or {}),
            },
            environ={},
        )
        self.runner = build_runner(self.config)
        self.daemon = self.runner.daemon
        (server,) = (s for s in self.runner.services if isinstance(s, HttpServer))
        self.base = f"http://127.0.0.1:{server.port}"
        signer = link_signer(self.config, self.daemon.store)
        assert signer is not None
        self.signer: LinkSigner = signer
        self.http = requests.Session()
        self.http.trust_env = False  # no proxy between us and 127.0.0.1
        self._running = RunnerThread(self.runner)
        self._running.start()

    def stop(self) -> None:
        self.http.close()  # a kept-alive connection would hold waitress for its idle timeout
        self._running.stop()

    def schedule(self, event_type: str = "Redeploy", **options: Any) -> str:
        event_id = self.sim.schedule(event_type, **options)
        wait_until(lambda: self.daemon.store.events.get(event_id), 10, message=f"{event_id} stored")
        return event_id

    def link(self, event_id: str) -> str:
        """The path of the event's link, as a sink's message carries it after public_url."""
        record = self.daemon.store.events.get(event_id)
        assert record is not None
        return f"/approve/{self.signer.token_for(record.event)}"

    def local(self, url: str) -> str:
        """A public approval URL as the path this server answers (the proxy's job)."""
        assert url.startswith(PUBLIC + "/approve/"), url
        return url[len(PUBLIC) :]

    def get(self, path: str) -> requests.Response:
        return self.http.get(self.base + path, timeout=10)

    def post(self, path: str, **form: str) -> requests.Response:
        return self.http.post(self.base + path, data=form, timeout=10)
