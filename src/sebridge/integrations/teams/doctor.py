"""Teams' part of `sebridge check`: the URL's kind against the format, and approval links.

A Teams webhook cannot be tried without posting a message into the channel,
so check posts nothing unless asked (`--send-test`, trial.py; its line then
says a test card follows): it says what it can tell from the URL (never the
URL itself). A MessageCard aimed at a Workflows URL is refused when the
configuration is loaded (settings.validate).
"""

from __future__ import annotations

from sebridge.integrations.base import Finding
from sebridge.integrations.teams.settings import (
    ADAPTIVE,
    CONNECTOR,
    KIND_NAMES,
    OTHER,
    WORKFLOWS,
    TeamsSettings,
    url_kind,
)

__all__ = ["check_teams"]


def check_teams(settings: TeamsSettings, links: bool, *, send_test: bool = False) -> list[Finding]:
    """Findings a person can act on; ok ones say what was (and was not) checked.

    send_test: a test card follows (its own line says how it went)."""
    kind = url_kind(settings.webhook_url.reveal())
    fits = {WORKFLOWS: ADAPTIVE, CONNECTOR: None}.get(kind)
    tried = (
        "; a test card is posted to try it (--send-test)"
        if send_test
        else "; nothing is posted to test it (`sebridge check --send-test` posts a test card)"
    )
    findings = [
        Finding(
            "teams",
            True,
            f"webhook_url is {KIND_NAMES[kind]}; format {settings.format}"
            + ("" if fits in (None, settings.format) else " (does not fit)")
            + tried,
        )
    ]
    if kind == OTHER:
        findings.append(
            Finding(
                "teams",
                True,
                "the URL's host is neither a Workflows host (*.environment.api.powerplatform.com)"
                " nor a connector (*.webhook.office.com): make sure it is the URL of a"
                " channel's webhook",
            )
        )
    if not links:  # valid: Teams then only alerts (docs/channels/approval-page.md)
        findings.append(
            Finding(
                "teams",
                True,
                "approval links are off (http.public_url is not set): cards are alerts without"
                " an Approve… button",
            )
        )
    return findings
