"""Where transitions go: console and JSON lines now; Slack, Teams and Jira beside them."""

from sebridge.sinks.base import Message, Sink

__all__ = ["Message", "Sink"]
