"""In a real browser (headless chromium): the approval page on a phone-sized screen, and every
Teams card template rendered by Microsoft's own Adaptive Cards renderer.

Screenshots are kept as test artifacts under the test's tmp_path.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from tests.browser import npm_packages, require_chromium, start_chromium
from tests.fakes.teams import FakeTeams
from tests.helpers import wait_until
from tests.link_bridge import LinkBridge

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

            assert browser.title.startswith("Approve Redeploy?")
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
    """A Redeploy as a channel sees it (the README's picture)."""
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
