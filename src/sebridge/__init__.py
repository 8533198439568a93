"""sebridge: Azure Scheduled Events to Slack, Teams and Jira."""

__version__ = "0.1.0"
