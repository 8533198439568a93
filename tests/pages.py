"""The documentation as the tests read it: README.md and the site's pages under docs/.

The tests that run what the docs show (a config, a command, a table) read it from here, by
page and heading, so a page and its test cannot drift apart: a section that moves or is
renamed fails the test that reads it, instead of leaving the test reading stale text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
CONTRIBUTING = ROOT / "CONTRIBUTING.md"

_FENCE = re.compile(r"^( *)(```+)(\w*)[^\n]*$")
_HEADING = re.compile(r"^(#{1,6}) (.+)$")


def page(name: str) -> str:
    """A page's text: `"getting-started.md"`, `"channels/slack.md"` (under docs/),
    `"README.md"` or `"CONTRIBUTING.md"`."""
    path = ROOT / name if name in ("README.md", "CONTRIBUTING.md") else DOCS / name
    return path.read_text(encoding="utf-8")


def pages() -> list[Path]:
    """Every page of the site, the README and CONTRIBUTING.md."""
    return [README, CONTRIBUTING, *sorted(DOCS.rglob("*.md"))]


def section(name: str, heading: str) -> str:
    """The section of page `name` whose heading reads `heading` (without its `#`s), from
    that heading to the next heading of the same or a higher level; headings inside fenced
    blocks (a TOML comment, a shell comment) are not headings."""
    lines = page(name).splitlines(keepends=True)
    start = level = None
    fenced = False
    for number, line in enumerate(lines):
        if _FENCE.match(line.rstrip("\n")):
            fenced = not fenced
            continue
        found = None if fenced else _HEADING.match(line.rstrip("\n"))
        if found is None:
            continue
        depth, title = len(found.group(1)), found.group(2).strip()
        if start is None and title == heading:
            start, level = number, depth
        elif start is not None and level is not None and depth <= level:
            return "".join(lines[start:number])
    if start is None:
        raise LookupError(f"{name} has no heading {heading!r}")
    return "".join(lines[start:])


@dataclass(frozen=True)
class Block:
    """A fenced block as a page shows it: its language, its text (the list indentation it
    sits in taken off), the line before it (an HTML comment naming its test) and where."""

    language: str
    text: str
    before: str
    page: str
    line: int


def blocks(text: str, language: str | None = None, *, name: str = "") -> list[Block]:
    """The fenced blocks of `text` (of one language, when given), in order."""
    found: list[Block] = []
    lines = text.splitlines()
    number = 0
    while number < len(lines):
        opening = _FENCE.match(lines[number])
        if opening is None:
            number += 1
            continue
        indent, ticks, lang = opening.groups()
        body: list[str] = []
        end = number + 1
        while end < len(lines) and lines[end].strip() != ticks:
            body.append(lines[end].removeprefix(indent))
            end += 1
        before = next((x for x in reversed(lines[:number]) if x.strip()), "")
        if language is None or lang == language:
            text_of = "".join(f"{x}\n" for x in body)
            found.append(Block(lang, text_of, before.strip(), name, number + 1))
        number = end + 1
    return found


def name_of(path: Path) -> str:
    """The name `page()` takes for a file `pages()` lists."""
    return path.name if path in (README, CONTRIBUTING) else path.relative_to(DOCS).as_posix()
