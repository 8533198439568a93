"""In a real browser (headless chromium): the approval page on a phone-sized screen, and every
Teams card template rendered by Microsoft's own Adaptive Cards renderer.

Screenshots are kept as test artifacts under the test's tmp_path.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from browser import npm_packages, require_chromium, start_chromium
from fakes.teams import FakeTeams
from helpers import wait_until
from link_bridge import LinkBridge
from sebridge.imds.simulator import Simulator
from sebridge.integrations.render import Renderer
from sebridge.integrations.teams.card import CardBuilder, samples
from sebridge.model import ScheduledEvent, Transition
from sebridge.model.message import Message

# chromium and chromium-driver (tests/browser.py)
pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("no_proxy")]


@pytest.fixture
def browser() -> Iterator[Any]:
    require_chromium()
    driver = start_chromium()
    yield driver
    driver.quit()


def test_approve_from_the_page_in_a_browser(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    with (
        Simulator(port=0, vm_name="vm0", approval_delay=3600) as sim,
        FakeTeams() as teams,
    ):
        bridge = LinkBridge(sim, tmp_path, {"teams": {"webhook_url": teams.workflows_url}})
        try:
            event_id = sim.schedule(
                "Redeploy",
                resources=["vm0", "vm1"],
                description="Planned maintenance: the host of this VM gets a security update.",
                duration=600,
            )
            (card,) = teams.wait_shown(1)
            link = card.card["actions"][0]["url"]
            browser.get(bridge.base + bridge.local(link))

            assert browser.title.startswith("Approve Redeploy of vm0, vm1?")
            body = browser.find_element(By.TAG_NAME, "body").text
            assert "vm0 (this VM)" in body and "Planned maintenance" in body
            button = browser.find_element(By.CSS_SELECTOR, "button[type=submit]")
            assert button.is_displayed() and button.size["width"] > 300  # a thumb-sized target
            # The inline style applied under the CSP: a green button, not the browser's grey.
            assert button.value_of_css_property("background-color") != "rgba(239, 239, 239, 1)"
            browser.save_screenshot(str(tmp_path / "approval-page.png"))
            sim.refresh()
            assert sim.posts == []  # opening the page approved nothing

            browser.find_element(By.ID, "name").send_keys("Night Owl")
            button.click()
            wait_until(lambda: "Approved by Night Owl via approval link" in browser.page_source, 10)
            assert (
                "Azure was told it may start now" in browser.find_element(By.TAG_NAME, "body").text
            )
            browser.save_screenshot(str(tmp_path / "approval-done.png"))
            assert sim.start_requests == [event_id]
            errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
            assert errors == []  # no CSP violation, no failed load
        finally:
            bridge.stop()
    assert (tmp_path / "approval-page.png").stat().st_size > 10_000


def realistic() -> Message:
    """A Redeploy as a channel sees it (docs/images/'s pictures: docs/channels/teams.md, approval-page.md)."""
    now = datetime.now(UTC)
    event = ScheduledEvent(
        "602D9444-D9D6-4C5B-A4C8-7C1F0EF1CB3A",
        "Redeploy",
        "Scheduled",
        ("vm0", "vm1"),
        not_before=now + timedelta(minutes=14, seconds=20),
        description="Host server is undergoing planned maintenance: the VM moves to another host.",
        source="Platform",
        duration_seconds=600,
    )
    link = "https://vm0.example.net/approve/NjAyRDk0NDQ.c2lnbmF0dXJl"
    return Message(Transition("scheduled", event, now), "vm0", "ask", approve_url=link)


RENDER = """
const cards = arguments[0];
const md = window.markdownit();
AdaptiveCards.AdaptiveCard.onProcessMarkdown = (text, result) => {
  result.outputHtml = md.render(text);
  result.didProcess = true;
};
const out = [];
cards.forEach((json, i) => {
  const declared = AdaptiveCards.Version.parse(json.version, new AdaptiveCards.SerializationContext());
  const context = new AdaptiveCards.SerializationContext(declared);
  const card = new AdaptiveCards.AdaptiveCard();
  card.parse(json, context);
  const events = [];
  for (let j = 0; j < context.eventCount; j++) {
    const e = context.getEventAt(j);
    events.push(`parse ${e.event}: ${e.message}`);
  }
  for (const e of card.validateProperties().validationEvents) {
    events.push(`validate ${e.event}: ${e.message}`);
  }
  const element = card.render();
  const holder = document.createElement("div");
  holder.className = "card";
  holder.id = "card" + i;
  if (element) holder.appendChild(element);
  document.getElementById("cards").appendChild(holder);
  out.push({declared: declared ? declared.toString() : null, events: events,
            text: element ? element.innerText : "", html: holder.innerHTML});
});
return out;
"""

HARNESS = """<!doctype html>
<html><head><meta charset="utf-8">
<script src="markdown-it.min.js"></script>
<script src="adaptivecards.min.js"></script>
<style>
  body { margin: 0; padding: 12px; background: #ebebeb; font-family: "Segoe UI", system-ui, sans-serif; }
  .card { width: 460px; margin-bottom: 12px; background: #fff; border-radius: 6px;
          box-shadow: 0 1px 4px rgba(0,0,0,.2); overflow: hidden; }
</style></head>
<body><div id="cards"></div></body></html>
"""


@pytest.mark.slow  # every card through the renderer in Chromium: about 4 s on a 2-core machine
def test_every_teams_card_renders_with_microsofts_renderer(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    modules = npm_packages()
    shutil.copy(modules / "adaptivecards" / "dist" / "adaptivecards.min.js", tmp_path)
    shutil.copy(modules / "markdown-it" / "dist" / "markdown-it.min.js", tmp_path)
    (tmp_path / "cards.html").write_text(HARNESS, encoding="utf-8")

    builder = CardBuilder(Renderer())
    messages = [realistic(), *samples("vm0")]
    cards = [builder.adaptive(m)["attachments"][0]["content"] for m in messages]
    browser.set_window_size(520, 900)
    browser.get((tmp_path / "cards.html").as_uri())
    results = browser.execute_script(RENDER, cards)

    assert len(results) == len(cards)
    for sample, card, result in zip(messages, cards, results, strict=True):
        where = f"{sample.transition.kind} card: {json.dumps(card)[:300]}"
        assert result["declared"] == card["version"] == "1.5", where
        assert result["events"] == [], where  # no warning, no error at the declared version
        assert sample.transition.event_id in result["text"] or "Hibernate" in result["text"], where
    first = next(
        i
        for i, m in enumerate(messages)
        if i and m.approve_url and m.transition.kind == "scheduled"
    )
    shown = results[first]["text"]
    # IMDS markdown shows as written: nothing became bold, a link or a list.
    assert "Host **update** [link](http://x) _under_ way" in shown
    assert (
        "<strong>update</strong>" not in results[first]["html"]
        and 'href="http://x"' not in results[first]["html"]
    )
    assert "Approve…" in shown
    browser.find_element(By.ID, f"card{first}").screenshot(str(tmp_path / "teams-escaping.png"))
    browser.find_element(By.ID, "card0").screenshot(str(tmp_path / "teams-card.png"))
    followup = next(i for i, m in enumerate(messages) if m.transition.kind == "approved")
    browser.find_element(By.ID, f"card{followup}").screenshot(str(tmp_path / "teams-followup.png"))
    assert (tmp_path / "teams-card.png").stat().st_size > 5_000


IPHONE = (390, 844)  # CSS pixels of a common iPhone: the narrowest screen the page must fit

RED_ENOUGH = 60
# What a drain prints: lines without a space (a URL, a pod list), then its reason.
DRAIN_OUTPUT = "\n".join(
    (
        "GET https://lb.example.net/api/v2/pools/web-frontend-eastus2/members/"
        + "0123456789abcdef" * 8
        + "?drain=true -> 503",
        '{"pods":[' + ",".join(f'"web-{i}-7f9c8d6b5-x2x9z"' for i in range(12)) + "]}",
        "drain refused: 3 sessions still open on web1",
    )
)  # a "danger" red's red channel exceeds its green and blue by this much


def _rgb(css: str) -> tuple[int, int, int]:
    """ "rgba(207, 34, 46, 1)" or "rgb(207, 34, 46)" -> (207, 34, 46)."""
    r, g, b = (int(float(x)) for x in css[css.index("(") + 1 : css.index(")")].split(",")[:3])
    return r, g, b


@pytest.mark.slow  # a daemon, a failing drain, the held page at 390 px: about 3 s
def test_the_held_page_fits_a_phone_and_approve_anyway_looks_dangerous(
    tmp_path: Path,
) -> None:
    """Issue 34, finding 9: at 390 px a failed hook's long output wraps (the held page was
    942 px wide, the reason cut off); "Approve anyway" is a red button unlike the safe
    Approve; and once approved anyway, no sentence says Azure still starts it at NotBefore."""
    from selenium.webdriver.common.by import By

    require_chromium()
    fails = tmp_path / "drain.py"
    fails.write_text(f"import sys\nprint({DRAIN_OUTPUT!r})\nsys.exit(1)\n")
    sections = {
        "policy": {
            "rules": [
                {"name": "drain", "event_types": ["Reboot"], "action": "ask", "prepare": ["drain"]},
                {"name": "people", "action": "ask"},
            ]
        },
        "hooks": {"drain": {"command": [sys.executable, str(fails)]}},
    }
    driver = start_chromium(*IPHONE)
    # A window cannot be narrower than 500 px: the phone's viewport is emulated, as DevTools do.
    metrics = {"width": IPHONE[0], "height": IPHONE[1], "deviceScaleFactor": 1, "mobile": True}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    with Simulator(port=0, vm_name="vm0", approval_delay=3600) as sim:
        bridge = LinkBridge(sim, tmp_path, sections)
        try:
            held = bridge.schedule("Reboot", resources=["vm0"])
            plain = bridge.schedule("Redeploy", resources=["vm0"])
            held_page = bridge.base + bridge.link(held)
            assert bridge.post(bridge.link(held), name="Bob").status_code == 200
            store = bridge.daemon.store
            wait_until(
                lambda: (a := store.approvals.get(held)) is not None and a.state == "held", 10
            )

            width = "return document.documentElement.scrollWidth"
            driver.get(bridge.base + bridge.link(plain))
            assert driver.execute_script("return window.innerWidth") == IPHONE[0]
            assert driver.execute_script(width) <= IPHONE[0]
            approve = driver.find_element(By.CSS_SELECTOR, "button[type=submit]")
            assert approve.text.startswith("Approve: let it start now")
            safe = _rgb(approve.value_of_css_property("background-color"))

            driver.get(held_page)
            body = driver.find_element(By.TAG_NAME, "body").text
            assert "drain refused: 3 sessions still open on web1" in body
            assert driver.execute_script(width) <= IPHONE[0], "the held page is wider than 390 px"
            output = driver.find_element(By.TAG_NAME, "pre")
            assert output.rect["x"] + output.rect["width"] <= IPHONE[0]  # all of it on screen
            driver.save_screenshot(str(tmp_path / "approval-held.png"))
            anyway = driver.find_element(By.CSS_SELECTOR, "button[type=submit]")
            assert anyway.text == "Approve anyway…"
            danger = _rgb(anyway.value_of_css_property("background-color"))
            r, g, b = danger
            assert r - max(g, b) >= RED_ENOUGH, f"Approve anyway is not red: {danger}"
            assert danger != safe

            anyway.click()  # the confirmation: what is not ready, and a red button again
            wait_until(lambda: 'name="confirm"' in driver.page_source, 10)
            assert driver.execute_script(width) <= IPHONE[0]
            confirm = driver.find_element(By.CSS_SELECTOR, "button[type=submit]")
            r, g, b = _rgb(confirm.value_of_css_property("background-color"))
            assert r - max(g, b) >= RED_ENOUGH
            driver.find_element(By.ID, "name").send_keys("Carol")
            confirm.click()
            wait_until(lambda: "Approved anyway by Carol" in driver.page_source, 10)
            done = driver.find_element(By.TAG_NAME, "body").text
            assert "Azure was told it may start now" in done
            # Told to start now, it does not also "start anyway at NotBefore, ready or not".
            assert "Azure starts it anyway" not in done
            assert driver.execute_script(width) <= IPHONE[0]
            assert sim.start_requests == [held]
            errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
            assert errors == []
        finally:
            bridge.stop()
            driver.quit()


DESKTOP = (1280, 900)


@pytest.mark.slow  # chromium, a daemon, a failing hook and two pages: about 2 s each
@pytest.mark.parametrize("size", [IPHONE, DESKTOP], ids=["390px", "desktop"])
def test_the_fleet_page_fits_the_screen_and_approves_anyway_after_a_confirmation(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    """Issue 38: the fleet page, signed in through the proxy's header, at 390 px and at a
    desktop's width: nothing wider than the screen, Approve green and Approve anyway red, and
    its forms (no script) carry the CSRF token through a confirmation to one StartRequests."""
    from selenium.webdriver.common.by import By

    require_chromium()
    fails = tmp_path / "drain.py"
    fails.write_text(f"import sys\nprint({DRAIN_OUTPUT!r})\nsys.exit(1)\n")
    sections = {
        "policy": {
            "rules": [
                {"name": "drain", "event_types": ["Reboot"], "action": "ask", "prepare": ["drain"]},
                {"name": "people", "action": "ask"},
            ],
            "prepare_lead_seconds": 3600,  # the drain runs (and fails) before anyone approves
        },
        "hooks": {"drain": {"command": [sys.executable, str(fails)]}},
        "web": {"page": True},
    }
    driver = start_chromium(*DESKTOP)
    width, height = size
    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 500}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd(
        "Network.setExtraHTTPHeaders", {"headers": {"X-Forwarded-User": "carol@example.net"}}
    )
    with Simulator(port=0, vm_name="vm0", approval_delay=3600) as sim:
        bridge = LinkBridge(sim, tmp_path, sections)
        try:
            held = bridge.schedule("Reboot", resources=["vm0", "web9"])
            plain = bridge.schedule("Redeploy", resources=["vm0"])
            fleet = bridge.base + "/fleet"
            driver.get(fleet)
            wait_until(lambda: driver.get(fleet) or "drain refused" in driver.page_source, 15)
            scroll = "return document.documentElement.scrollWidth"
            assert driver.execute_script("return window.innerWidth") == width
            assert driver.execute_script(scroll) <= width, "the fleet page is wider than the screen"
            body = driver.find_element(By.TAG_NAME, "body").text
            assert "Signed in as carol@example.net" in body
            assert "web9: agent no agent" in body and "vm0: agent live" in body
            for pre in driver.find_elements(By.TAG_NAME, "pre"):
                assert pre.rect["x"] + pre.rect["width"] <= width  # a hook's output wraps
            cards = driver.find_elements(By.CSS_SELECTOR, "section.event")
            assert len(cards) == 2
            if width > 1000:  # side by side on a desktop, one above the other on a phone
                assert cards[0].rect["y"] == cards[1].rect["y"]
            else:
                assert cards[1].rect["y"] > cards[0].rect["y"] + cards[0].rect["height"] - 1
            approve = driver.find_element(By.XPATH, "//button[starts-with(., 'Approve: let')]")
            anyway = driver.find_element(By.XPATH, "//button[. = 'Approve anyway…']")
            r, g, b = _rgb(anyway.value_of_css_property("background-color"))
            assert r - max(g, b) >= RED_ENOUGH, "Approve anyway is not red"
            safe = _rgb(approve.value_of_css_property("background-color"))
            assert safe[1] > safe[0], "Approve is not green"
            driver.save_screenshot(str(tmp_path / f"fleet-{width}.png"))

            anyway.click()  # the confirmation: what is not ready, a red button again
            wait_until(lambda: 'name="confirm"' in driver.page_source, 10)
            assert driver.execute_script(scroll) <= width
            confirm = driver.find_element(By.CSS_SELECTOR, "button.danger")
            r, g, b = _rgb(confirm.value_of_css_property("background-color"))
            assert r - max(g, b) >= RED_ENOUGH
            assert sim.start_requests == []
            confirm.click()
            wait_until(lambda: "Approved anyway by carol@example.net" in driver.page_source, 10)
            wait_until(lambda: sim.start_requests == [held], 10)
            approval = bridge.daemon.store.approvals.get(held)
            assert approval is not None and approval.anyway_via == "page"
            assert bridge.daemon.store.approvals.get(plain) is None
            errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
            assert errors == []  # no CSP violation, no failed load
        finally:
            bridge.stop()
            driver.quit()
