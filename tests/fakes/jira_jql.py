"""The slice of JQL the fake Jira understands, parsed the way Jira reads it.

Clauses joined by AND: `project = X`, `labels = x`, `labels in (a, b)`,
`status = "S"`, then an optional `ORDER BY created ASC|DESC`. Values are
bare words or double-quoted strings with backslash escapes. Anything else
is answered like Jira answers a query it cannot parse (400, errorMessages).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ["JqlError", "parse_jql"]

_TOKEN = re.compile(r'\s*(?:(\()|(\))|(,)|(=)|"((?:[^"\\]|\\.)*)"|([A-Za-z0-9_.\-]+))')


class JqlError(ValueError):
    """Jira's "Error in the JQL Query" (HTTP 400)."""


def _tokens(jql: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(jql.rstrip()):
        m = _TOKEN.match(jql, pos)
        if not m:
            raise JqlError(
                f"Error in the JQL Query: the character '{jql[pos]}' is a reserved JQL character (line 1, character {pos + 1})."
            )
        pos = m.end()
        if m.group(5) is not None:
            out.append(("str", re.sub(r"\\(.)", r"\1", m.group(5))))
        elif m.group(6):
            out.append(("word", m.group(6)))
        else:
            out.append(("op", m.group(0).strip()))
    return out


def parse_jql(jql: str) -> tuple[Callable[[dict[str, Any]], bool], bool]:
    """A predicate over fake issues, and whether results come newest first."""
    tokens = _tokens(jql)
    clauses: list[Callable[[dict[str, Any]], bool]] = []
    descending = False
    i = 0

    def value(at: int) -> str:
        if at >= len(tokens) or tokens[at][0] not in ("str", "word"):
            raise JqlError("Error in the JQL Query: Expecting either a value, list or function.")
        return tokens[at][1]

    while i < len(tokens):
        kind, text = tokens[i]
        if kind == "word" and text.upper() == "AND" and clauses:
            i += 1
            continue
        if kind == "word" and text.upper() == "ORDER":
            rest = [t[1].upper() for t in tokens[i:]]
            if rest[:3] != ["ORDER", "BY", "CREATED"]:
                raise JqlError("Error in the JQL Query: only ORDER BY created is supported here.")
            descending = len(rest) > 3 and rest[3] == "DESC"
            break
        field = text.lower()
        if field not in ("project", "labels", "status"):
            raise JqlError(
                f"Field '{text}' does not exist or you do not have permission to view it."
            )
        op = tokens[i + 1][1].lower() if i + 1 < len(tokens) else ""
        if op == "=":
            wanted = [value(i + 2)]
            i += 3
        elif op == "in":
            if tokens[i + 2] != ("op", "("):
                raise JqlError("Error in the JQL Query: Expecting '(' after 'in'.")
            wanted, i = [], i + 3
            while tokens[i] != ("op", ")"):
                wanted.append(value(i))
                i += 2 if tokens[i + 1] == ("op", ",") else 1
            i += 1
        else:
            raise JqlError(f"Error in the JQL Query: Expecting operator but got '{op}'.")
        clauses.append(_clause(field, wanted))
    return (lambda issue: all(c(issue) for c in clauses)), descending


def _clause(field: str, wanted: list[str]) -> Callable[[dict[str, Any]], bool]:
    folded = {w.casefold() for w in wanted}
    if field == "project":
        return lambda issue: issue["project"].casefold() in folded
    if field == "status":
        return lambda issue: issue["status"].casefold() in folded
    return lambda issue: any(label.casefold() in folded for label in issue["labels"])
