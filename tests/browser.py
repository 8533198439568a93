"""A real browser for tests: Debian's chromium driven through chromium-driver by selenium,
and Microsoft's Adaptive Cards renderer (npm `adaptivecards`) installed once into the
repository's git-ignored `.cache/npm` (never fetched from a CDN while a test runs).

Tests that need the browser skip, saying why, only when chromium or chromium-driver is not
installed (`.ci/run` installs them); anything else that goes wrong fails.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
REPO = Path(__file__).resolve().parent.parent
NPM_DIR = REPO / ".cache" / "npm"
NPM_PACKAGES = ("adaptivecards@3.0.6", "markdown-it@14.1.0")
PHONE = (412, 915)  # CSS pixels of a common Android phone
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
)


def require_chromium() -> None:
    """Skip the calling test when Debian's chromium or chromium-driver is missing."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if missing:
        pytest.skip(
            f"{', '.join(missing)} not installed: apt-get install -y chromium chromium-driver"
            " (.ci/run does this)"
        )


def start_chromium(width: int = PHONE[0], height: int = PHONE[1]) -> Any:
    """A headless chromium under selenium, with the system chromedriver (no driver download)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--window-size={width},{height}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def npm_packages() -> Path:
    """node_modules holding adaptivecards and markdown-it, installed with npm on first use.

    Two test files use them (test_browser, test_pictures), each perhaps on its own xdist
    worker: the first to come installs while the other waits on a lock, never both at once
    into one folder."""
    modules = NPM_DIR / "node_modules"
    wanted = [modules / "adaptivecards" / "dist" / "adaptivecards.min.js"]
    wanted.append(modules / "markdown-it" / "dist" / "markdown-it.min.js")
    if all(p.exists() for p in wanted):
        return modules
    NPM_DIR.mkdir(parents=True, exist_ok=True)
    with (NPM_DIR / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not all(p.exists() for p in wanted):
            _npm_install(wanted)
    return modules


def _npm_install(wanted: list[Path]) -> None:
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("npm is needed to install the adaptivecards renderer: apt-get install -y npm")
    done = subprocess.run(
        [
            npm,
            "install",
            "--prefix",
            str(NPM_DIR),
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            *NPM_PACKAGES,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0 or not all(p.exists() for p in wanted):
        pytest.fail(f"npm install {' '.join(NPM_PACKAGES)} failed: {done.stderr[-2000:]}")
