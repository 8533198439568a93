"""Take the documentation's pictures in Chromium: `python scripts/pictures.py [--out DIR]`.

One Reboot of web1, web2 and web3 (NotBefore in 15 minutes) goes through sebridge for real:
the daemon on web2 (its SQLite store in a temporary folder, no other agent) polls the IMDS
simulator; its rule asks a person and runs a `drain` prepare hook first; it delivers to the fake
Slack and the fake Teams the tests use (tests/fakes/: Slack's Web API and a Teams Workflows
webhook, on 127.0.0.1) and serves the approval page behind the event's signed link. The three
are taken while the event waits for a person (ask); then someone approves it through the link,
web2's drain fails, the approval is held, and the three are taken again (held):

- slack-ask.png, slack-held.png: the Block Kit blocks sebridge sent (chat.postMessage, then
  chat.update), drawn by scripts/blockkit.py in a Slack-like layout (Slack has no renderer).
- teams-ask.png, teams-held.png: the Adaptive Cards sebridge posted (the event's card, then
  the held one), drawn by Microsoft's renderer (npm adaptivecards, as the browser tests do).
- page-ask.png, page-held.png: the approval page, whole, at a phone's width (390 CSS pixels).
- fleet-page.png: the fleet page (`[web] page`), whole, at 390 px, once the Reboot is held and
  a Redeploy of web2 and web4 waits for a person; asked for as the proxy in front would ask
  (X-Forwarded-User from 127.0.0.1).

Needs what the browser tests need (tests/browser.py): /usr/bin/chromium, /usr/bin/chromedriver,
npm, and the test extra (selenium). Rerun it after changing a template and the pictures are
current (their times and event id change with each run); tests/test_pictures.py runs it into a
temporary folder and checks what each picture showed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO / "tests"), str(HERE)]  # the tests' fakes and browser set-up; blockkit

import blockkit  # noqa: E402  (found through the path above when imported, not run)

OUT = REPO / "docs" / "images"
VMS = ["web1", "web2", "web3"]
THIS_VM = "web2"
# One EventId every run, so a rerun changes only the times in the pictures.
EVENT_ID = "5C6F1E2A-8B3D-4F7A-9E21-0D4B6A8C2F13"
SECOND_ID = "9A1D7B3C-2E4F-4A6B-8C0D-1E2F3A4B5C6D"  # the fleet page's second event
PERSON = "alice@example.net"  # whom the proxy in front of the fleet page names
DESCRIPTION = "Host server is undergoing maintenance."
NOTICE = 15 * 60  # seconds from now to NotBefore
DRAIN_OUTPUT = "drain refused: 3 sessions still open on web2 (lb pool web-frontend)"
APPROVER = "Alice"
PHONE: dict[str, Any] = {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True}
SLACK_WIDTH, TEAMS_WIDTH = 640, 520  # window widths: a chat pane on a laptop
WAIT = 20.0  # seconds for a delivery or the hold to be seen
PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")

TEAMS_PAGE = """<!doctype html>
<html><head><meta charset="utf-8">
<script src="markdown-it.min.js"></script>
<script src="adaptivecards.min.js"></script>
<style>
  body { margin: 0; padding: 12px; background: #ebebeb;
         font-family: "Segoe UI", system-ui, sans-serif; }
  #card { width: 460px; background: #fff; border-radius: 6px;
          box-shadow: 0 1px 4px rgba(0,0,0,.2); overflow: hidden; }
</style></head><body><div id="card"></div></body></html>
"""
# Markdown as Teams reads it (markdown-it, as tests/test_browser.py renders every card).
TEAMS_RENDER = """
const md = window.markdownit();
AdaptiveCards.AdaptiveCard.onProcessMarkdown = (text, result) => {
  result.outputHtml = md.render(text);
  result.didProcess = true;
};
const json = arguments[0];
const context = new AdaptiveCards.SerializationContext(
  AdaptiveCards.Version.parse(json.version, new AdaptiveCards.SerializationContext()));
const card = new AdaptiveCards.AdaptiveCard();
card.parse(json, context);
document.getElementById("card").replaceChildren(card.render());
"""


@dataclass(frozen=True)
class Picture:
    """A picture taken: where it was written, and the text that was on screen."""

    path: Path
    text: str
    size: tuple[int, int]  # what was taken, in CSS pixels (one device pixel each)


@dataclass(frozen=True)
class Delivered:
    """What sebridge showed of the event at one moment."""

    slack: list[dict[str, Any]]  # the message's blocks in the channel
    teams: dict[str, Any]  # the latest Adaptive Card
    page: str  # the approval page's URL on the daemon
    fleet: str = ""  # the fleet page's URL on the daemon (held: with a second event)


def _wait(predicate: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise SystemExit(f"pictures: timed out after {WAIT:g} s waiting for {what}")
        time.sleep(0.05)
    return value


@contextmanager
def _daemon(folder: Path) -> Iterator[tuple[Any, Any, Any]]:
    """The daemon on web2 with Slack and Teams (the tests' fakes) and a drain hook that fails."""
    from fakes.slack import FakeSlack
    from fakes.teams import FakeTeams
    from link_bridge import LinkBridge
    from sebridge.imds.simulator import Simulator

    drain = folder / "drain.py"
    drain.write_text(f"import sys\nprint({DRAIN_OUTPUT!r})\nsys.exit(1)\n", encoding="utf-8")
    rule = {"name": "drain first", "event_types": ["Reboot"], "action": "ask"}
    with (
        Simulator(port=0, vm_name=THIS_VM, approval_delay=3600) as sim,
        FakeSlack() as slack,
        FakeTeams() as teams,
    ):
        sections = {
            "slack": {
                "bot_token": slack.bot_token,
                "app_token": slack.app_token,
                "channel": "C0123456789",
                "api_url": slack.url,
            },
            "teams": {"webhook_url": teams.workflows_url},
            "policy": {"rules": [{**rule, "prepare": ["drain"]}]},
            "hooks": {"drain": {"command": [sys.executable, str(drain)]}},
            "web": {"page": True},
        }
        bridge = LinkBridge(sim, folder, sections, vm_name=THIS_VM)
        try:
            yield bridge, slack, teams
        finally:
            bridge.stop()


def _blocks(slack: Any, event_id: str, word: str) -> list[dict[str, Any]] | None:
    """The blocks of the event's message in the channel, once they say `word`."""
    for message in slack.messages.values():
        payload = (message.metadata or {}).get("event_payload") or {}
        if payload.get("event_id") == event_id and not message.thread_ts:
            blocks = list(message.as_dict().get("blocks") or [])
            return blocks if word in json.dumps(blocks) else None
    return None


def play(folder: Path) -> Iterator[tuple[str, Delivered]]:
    """Run the event: yields ("ask", ...) while it waits for a person, then ("held", ...) once
    its approval is held; the daemon serves the page meanwhile."""
    with _daemon(folder) as (bridge, slack, teams):
        event_id = bridge.schedule(
            "Reboot", event_id=EVENT_ID, resources=VMS, notice=NOTICE, description=DESCRIPTION
        )
        link = bridge.link(event_id)
        blocks = _wait(lambda: _blocks(slack, event_id, "approve"), "the Slack message")
        (card,) = teams.wait_shown(1, WAIT)
        yield "ask", Delivered(blocks, card.card, bridge.base + link)

        answer = bridge.post(link, name=APPROVER)
        if answer.status_code != 200:
            raise SystemExit(f"pictures: approving through the link answered {answer.status_code}")
        store = bridge.daemon.store
        _wait(lambda: (a := store.approvals.get(event_id)) and a.state == "held", "the hold")
        # The hold's own update ("Held: Approval by ..."): a message sent meanwhile (the failed
        # drain's) says only "Held: a listed VM is not ready" once the approval is held.
        blocks = _wait(
            lambda: _blocks(slack, event_id, "Held: Approval by"), "the held Slack message"
        )
        cards = teams.wait_shown(2, WAIT)
        bridge.schedule("Redeploy", event_id=SECOND_ID, resources=[THIS_VM, "web4"], notice=NOTICE)
        fleet = bridge.base + "/fleet"
        yield "held", Delivered(blocks, cards[-1].card, bridge.base + link, fleet)


def _require_browser() -> None:
    from browser import CHROMEDRIVER, CHROMIUM

    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if missing:
        raise SystemExit(
            f"pictures: {', '.join(missing)} not installed: "
            "apt-get install -y chromium chromium-driver"
        )


def _shot(
    driver: Any,
    url: str,
    path: Path,
    *,
    width: int,
    crop: str = "",
    script: tuple[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> Picture:
    """A picture of the page at `url` shown `width` CSS pixels wide, the viewport as tall as
    the page (nothing cut off), cropped to the element `crop` or else the whole page. A window
    cannot be narrower than 500 px: the viewport is emulated, as tests/test_browser.py does.

    Args:
        script: JavaScript to run once the page is loaded, and its argument (a card to draw).
        headers: sent with the request (what a proxy in front would add).
    """
    from selenium.webdriver.common.by import By

    metrics = {**PHONE, "width": width, "mobile": width == PHONE["width"]}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": headers or {}})
    driver.get(url)
    if script:
        driver.execute_script(*script)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {**metrics, "height": height})
    try:
        if not crop:
            driver.save_screenshot(str(path))
            body = driver.find_element(By.TAG_NAME, "body")
            return Picture(path, str(body.text), (width, int(height)))
        element = driver.find_element(By.CSS_SELECTOR, crop)
        element.screenshot(str(path))
        size = (round(element.rect["width"]), round(element.rect["height"]))
        return Picture(path, str(element.text), size)
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def take(out: Path) -> dict[str, Picture]:
    """Write the seven pictures into `out`; returns each by its file name."""
    from browser import npm_packages, start_chromium

    _require_browser()
    out.mkdir(parents=True, exist_ok=True)
    pictures: dict[str, Picture] = {}
    with tempfile.TemporaryDirectory(prefix="sebridge-pictures-") as scratch:
        folder = Path(scratch)
        modules = npm_packages()
        shutil.copy(modules / "adaptivecards" / "dist" / "adaptivecards.min.js", folder)
        shutil.copy(modules / "markdown-it" / "dist" / "markdown-it.min.js", folder)
        teams = folder / "teams.html"
        teams.write_text(TEAMS_PAGE, encoding="utf-8")
        (folder / "daemon").mkdir()
        driver = start_chromium()
        try:
            for state, shown in play(folder / "daemon"):
                slack = folder / f"slack-{state}.html"
                slack.write_text(blockkit.page(shown.slack, datetime.now(UTC)), encoding="utf-8")
                name = f"slack-{state}.png"
                pictures[name] = _shot(
                    driver, slack.as_uri(), out / name, width=SLACK_WIDTH, crop="#shot"
                )
                name = f"teams-{state}.png"
                pictures[name] = _shot(
                    driver,
                    teams.as_uri(),
                    out / name,
                    width=TEAMS_WIDTH,
                    crop="#card",
                    script=(TEAMS_RENDER, shown.teams),
                )
                name = f"page-{state}.png"
                pictures[name] = _shot(driver, shown.page, out / name, width=PHONE["width"])
                if shown.fleet:
                    name = "fleet-page.png"
                    pictures[name] = _shot(
                        driver,
                        shown.fleet,
                        out / name,
                        width=PHONE["width"],
                        headers={"X-Forwarded-User": PERSON},
                    )
        finally:
            driver.quit()
    return pictures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python scripts/pictures.py",
        description="Take the docs' pictures of Slack, Teams, the approval page and the fleet"
        " page in Chromium.",
    )
    parser.add_argument("--out", type=Path, default=OUT, help=f"the folder (default: {OUT})")
    args = parser.parse_args(argv)
    for name in PROXIES:  # every server here is on 127.0.0.1
        os.environ.pop(name, None)
    for name, picture in sorted(take(args.out).items()):
        print(f"{name}: {picture.path.stat().st_size // 1024} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
