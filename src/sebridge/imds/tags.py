"""This VM's Azure tags, as IMDS's instance metadata gives them (`compute.tagsList`, else
`compute.tags`), for rules that match on who an event affects (a rule's `tags`).

Read once at start, by an agent whose rules ask for tags (cli/runtime.py), and recorded in
the store under the agent's name, so every agent of a fleet can match another VM's tags.
See docs/ARCHITECTURE.md, "Policy".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sebridge.imds.client import ImdsClient
from sebridge.kernel.errors import MalformedDocumentError

__all__ = ["parse_tags", "read_tags"]


def parse_tags(compute: Mapping[str, Any]) -> dict[str, str]:
    """The tags of a compute section: `tagsList` ([{"name", "value"}], which keeps a ";" or
    ":" in a value) when IMDS sends it, else `tags` ("name:value;name2:value2")."""
    listed = compute.get("tagsList")
    if isinstance(listed, list):
        return {
            t["name"]: t["value"] if isinstance(t.get("value"), str) else ""
            for t in listed
            if isinstance(t, Mapping) and isinstance(t.get("name"), str) and t["name"]
        }
    text = compute.get("tags")
    if not isinstance(text, str):
        return {}
    tags: dict[str, str] = {}
    for pair in text.split(";"):
        name, _, value = pair.partition(":")
        if name:
            tags[name] = value
    return tags


def read_tags(client: ImdsClient) -> dict[str, str]:
    """This VM's tags, asked of IMDS once. Raises ImdsError (MalformedDocumentError for an
    answer that is not a compute section)."""
    body = client.instance_compute()
    try:
        compute = json.loads(body)
    except ValueError:
        compute = None
    if not isinstance(compute, Mapping):
        raise MalformedDocumentError("IMDS instance metadata is not a JSON object")
    return parse_tags(compute)
