"""The one list of integrations. The runtime, `sebridge check`, the CLI's
approval notices and the HTTP server all read it: adding an integration is
its folder plus one line here."""

from __future__ import annotations

from typing import Any

from sebridge.integrations.base import Integration
from sebridge.integrations.console import Console
from sebridge.integrations.jira import Jira
from sebridge.integrations.jsonl import Jsonl
from sebridge.integrations.slack import Slack
from sebridge.integrations.teams import Teams

__all__ = ["REGISTRY"]

# Order is delivery order on the console and in `sebridge check`.
REGISTRY: tuple[Integration[Any], ...] = (Console(), Jsonl(), Slack(), Teams(), Jira())
