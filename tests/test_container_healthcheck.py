"""The image's HEALTHCHECK (sebridge.cli.healthcheck) follows the config's [http] listen:
it asks /healthz there and says its answer; without [http] listen there is no /healthz,
and it passes saying so (docs/operations/container.md)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from sebridge.cli import healthcheck


class Answer(http.server.BaseHTTPRequestHandler):
    status = 200
    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        Answer.paths.append(self.path)
        body = b'{"status": "failing"}' if Answer.status == 503 else b'{"status": "ok"}'
        self.send_response(Answer.status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[http.server.HTTPServer]:
    srv = http.server.HTTPServer(("127.0.0.1", 0), Answer)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    Answer.paths = []
    yield srv
    srv.shutdown()
    srv.server_close()


def configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: str) -> None:
    path = tmp_path / "sebridge.toml"
    path.write_text(f'[imds]\nvm_name = "vm0"\n{extra}', encoding="utf-8")
    monkeypatch.setenv("SEBRIDGE_CONFIG", str(path))


@pytest.mark.parametrize("status", [200, 503])
def test_it_asks_healthz_at_the_configured_address(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    server: http.server.HTTPServer,
    status: int,
) -> None:
    Answer.status = status
    port = server.server_address[1]
    configured(tmp_path, monkeypatch, f'[http]\nlisten = "0.0.0.0:{port}"\n')
    assert healthcheck.main() == (0 if status == 200 else 1)
    assert Answer.paths == ["/healthz"]
    said = capsys.readouterr().out
    assert said.startswith(f"healthcheck: http://127.0.0.1:{port}/healthz: {status}"), said


def test_without_http_listen_there_is_nothing_to_ask_and_it_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    configured(tmp_path, monkeypatch, "")
    assert healthcheck.main() == 0
    assert capsys.readouterr().out == (
        "healthcheck: no [http] listen in the config: no /healthz to ask, not checked\n"
    )


def test_nothing_listening_where_the_config_says_is_unhealthy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from helpers import free_port

    port = free_port()
    configured(tmp_path, monkeypatch, f'[http]\nlisten = "127.0.0.1:{port}"\n')
    assert healthcheck.main() == 1
    assert f"healthcheck: http://127.0.0.1:{port}/healthz: " in capsys.readouterr().out
