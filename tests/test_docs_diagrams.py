"""The diagrams the docs draw (mermaid fences: the two flows in the README and on the "How
it works" page) render: mermaid's own renderer, in chromium, makes an SVG of each, with the
boxes the text names. GitHub and the site draw them with the same library; a syntax error
there shows as an error box instead of the picture."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from browser import NPM_DIR, require_chromium, start_chromium
from pages import blocks, name_of, page, pages

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # chromium, and npm on first use

MERMAID = "mermaid@11.4.1"
PREFIX = NPM_DIR / "mermaid"


def mermaid_js() -> Path:
    """mermaid's browser bundle, installed with npm into .cache/npm/mermaid on first use."""
    bundle = PREFIX / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"
    if bundle.exists():
        return bundle
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("npm is needed to install mermaid: apt-get install -y npm")
    PREFIX.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            npm,
            "install",
            "--prefix",
            str(PREFIX),
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            MERMAID,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0 or not bundle.exists():
        pytest.fail(f"npm install {MERMAID} failed: {done.stderr[-2000:]}")
    return bundle


DIAGRAMS = [
    (name_of(path), block.text)
    for path in pages()
    for block in blocks(page(name_of(path)), "mermaid")
]

RENDER = """
const [texts, done] = [arguments[0], arguments[arguments.length - 1]];
mermaid.initialize({startOnLoad: false, securityLevel: "strict"});
(async () => {
  const out = [];
  for (const [i, text] of texts.entries()) {
    try {
      const {svg} = await mermaid.render("d" + i, text);
      out.push({svg});
    } catch (error) {
      out.push({error: String(error && error.message || error)});
    }
  }
  done(out);
})();
"""


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    require_chromium()
    html = tmp_path_factory.mktemp("mermaid") / "index.html"
    html.write_text(f'<!doctype html><script src="{mermaid_js().as_uri()}"></script><body></body>')
    browser = start_chromium(1200, 900)
    try:
        browser.set_script_timeout(60)
        browser.get(html.as_uri())
        return list(browser.execute_async_script(RENDER, [text for _, text in DIAGRAMS]))
    finally:
        browser.quit()


def test_the_readme_and_how_it_works_draw_the_two_flows() -> None:
    assert {name for name, _ in DIAGRAMS} == {"README.md", "how-it-works.md"}


def test_every_diagram_renders_with_the_boxes_its_text_names(
    rendered: list[dict[str, Any]],
) -> None:
    assert len(rendered) == len(DIAGRAMS)
    for (name, text), result in zip(DIAGRAMS, rendered, strict=True):
        assert "error" not in result, f"{name}: {json.dumps(result)}"
        assert "StartRequests" in text and "StartRequests" in result["svg"], name
        assert "Syntax error" not in result["svg"], name
