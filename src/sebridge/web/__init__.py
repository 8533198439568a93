"""Inbound: the HTTP server (Slack HTTP mode, health), Slack Socket Mode, and click handling."""
