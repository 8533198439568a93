"""E-mail's part of `sebridge check`: connect, EHLO, STARTTLS, sign in; no mail sent.

Each step that worked is said, with what the server told (its banner, the TLS
version, the user signed in); the first that failed says what to fix, never
the password. `--send-test` then sends one mail (trial.py).
"""

from __future__ import annotations

from sebridge.integrations.base import Finding
from sebridge.integrations.email.settings import EmailSettings
from sebridge.integrations.email.smtp import SmtpServer
from sebridge.kernel.errors import DeliveryError

__all__ = ["check_email"]


def check_email(
    settings: EmailSettings, section: str, links: bool, *, send_test: bool = False
) -> list[Finding]:
    """Findings a person can act on; ok ones say what was (and was not) tried."""
    server = SmtpServer(settings, section)
    where = server.said.server
    try:
        with server.session() as opened:
            pass
    except DeliveryError as exc:
        said = str(exc).removeprefix(f"{section}: ").removesuffix("; will retry")
        return [Finding(section, False, f"cannot open a session with {where}: {said}")]
    tls = opened.tls or "no TLS (a relay on this host)"
    signed_in = (
        f"signed in as {opened.signed_in}" if opened.signed_in else "no sign-in (no username)"
    )
    sent = (
        "; a test mail follows (--send-test)"
        if send_test
        else f"; no mail sent (`sebridge check --send-test` sends one to {', '.join(settings.to)})"
    )
    findings = [
        Finding(
            section,
            True,
            f"{where} ({settings.mode}) answered EHLO as {opened.banner or '(no name)'};"
            f" {tls}; {signed_in}{sent}",
        )
    ]
    if not links:
        findings.append(
            Finding(
                section,
                True,
                "approval links are off (http.public_url is not set): mails carry no Approve link",
            )
        )
    return findings
