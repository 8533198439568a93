"""scripts/pictures.py in a real browser (headless chromium): the docs' seven pictures, each a
PNG of a sensible size, and what each showed when it was taken: the ask event's Approve, the
held event's hold, its drain's output and Approve anyway; the fleet page with both events."""

from __future__ import annotations

import importlib.util
import struct
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from browser import require_chromium

# chromium and chromium-driver (tests/browser.py); the daemon, a hook and the browser: ~5 s
pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.usefixtures("no_proxy")]

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "pictures.py"
PNG = b"\x89PNG\r\n\x1a\n"
DRAIN = "drain refused: 3 sessions still open on web2"
# What each picture must show, and what it must not.
SHOWS = {
    "slack-ask.png": (
        ["Reboot of web1, web2, web3", "Approve", "I'm on it", "web2: waiting", "Slack-like"],
        ["Held", "Approve anyway"],
    ),
    "slack-held.png": (
        ["Held: Approval by approval link (Alice) held: drain failed", DRAIN, "Approve anyway"],
        ["I'm on it"],
    ),
    "teams-ask.png": (["Reboot of web1, web2, web3", "Approve…", "web2: waiting"], ["Held"]),
    "teams-held.png": (["Held", DRAIN, "Open the approval page…"], ["Approve…"]),
    "page-ask.png": (["Reboot of web1, web2, web3", "Approve: let it start now"], ["anyway"]),
    "page-held.png": (["Held, not approved", DRAIN, "Approve anyway…"], ["let it start now"]),
    "fleet-page.png": (
        [
            "Maintenance in the fleet",
            "alice@example.net",
            "Reboot of web1, web2, web3",
            "Redeploy of web2, web4",
            "web4: agent no agent",
            DRAIN,
            "Approve anyway…",
            "Retry the failed hooks",
            "Approve: let it start now",
        ],
        [],
    ),
}


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pictures", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's header; fails on anything that is not a PNG."""
    data = path.read_bytes()
    assert data[:8] == PNG and data[12:16] == b"IHDR", f"{path.name} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_the_seven_pictures_show_an_ask_and_a_held_event(tmp_path: Path) -> None:
    require_chromium()
    out = tmp_path / "images"
    pictures = _load().take(out)

    assert sorted(pictures) == sorted(SHOWS)
    assert sorted(p.name for p in out.iterdir()) == sorted(SHOWS)
    for name, (shown, hidden) in SHOWS.items():
        picture = pictures[name]
        assert picture.path == out / name
        width, height = _png_size(picture.path)
        assert (width, height) == picture.size, name  # all of it: nothing cut at the window
        assert 10_000 < picture.path.stat().st_size < 400_000, name
        assert 200 < height < 2_500, (name, height)
        for text in shown:
            assert text in picture.text, (name, text, picture.text)
        for text in hidden:
            assert text not in picture.text, (name, text)
        if name.startswith(("page-", "fleet-")):
            assert width == 390  # the phone's width the page is taken at
        elif name.startswith("teams-"):
            assert width == 460  # the card, cropped to it
        else:
            assert 400 <= width <= 640  # the message in a chat pane, cropped to it


def test_the_script_runs_from_anywhere_and_says_what_it_does(tmp_path: Path) -> None:
    """`python scripts/pictures.py --help`, from another folder: its imports resolve."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "--out" in done.stdout and "docs/images" in done.stdout
