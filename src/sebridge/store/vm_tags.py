"""The Azure tags of each agent's VM, as the agent read them from IMDS at start.

One row per VM (the agent's name, as Resources list it): a rule's `tags` matcher reads
every VM's tags, so on any agent of a fleet an event is matched by the tags of every VM it
lists that an agent has run on (policy/matchers.py). See docs/ARCHITECTURE.md, "Policy".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime

from sebridge.store.codec import iso
from sebridge.store.database import Database

__all__ = ["VmTags"]


class VmTags:
    """Reads and writes the vm_tags table."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def record(self, vm: str, tags: Mapping[str, str], now: datetime) -> None:
        """Keep `vm`'s tags as read at `now` (replacing what an earlier start read)."""
        data = json.dumps(dict(tags), sort_keys=True, separators=(",", ":"))
        with self._db.transaction():
            self._db.execute(
                "INSERT INTO vm_tags (vm, tags, read_at) VALUES (?, ?, ?) ON CONFLICT (vm) "
                "DO UPDATE SET tags = excluded.tags, read_at = excluded.read_at",
                (vm, data, iso(now)),
            )

    def all(self) -> dict[str, dict[str, str]]:
        """Every VM's recorded tags, by its name in lower case (Azure's names ignore case)."""
        rows = self._db.all("SELECT vm, tags FROM vm_tags", ())
        return {str(vm).lower(): _tags(text) for vm, text in rows}


def _tags(text: str) -> dict[str, str]:
    data = json.loads(text)
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
