"""The approval links' part of `sebridge check`: where links point, and which key signs them."""

from __future__ import annotations

from sebridge.config.loader import Config
from sebridge.integrations.base import Finding
from sebridge.store import Store
from sebridge.web.links import LINK_KEY_SETTING

__all__ = ["check_links"]


def check_links(config: Config, store: Store | None) -> list[Finding]:
    """Findings about approval links; none when `[http] public_url` is not set. Never shows
    the key.

    Args:
        store: the opened store (None: it could not be opened; that is reported elsewhere).
    """
    http = config.http
    if not http.public_url:
        return []
    findings = [
        Finding(
            "http",
            True,
            f"approval links point at {http.public_url}/approve/... (served on {http.listen};"
            " the URL must reach it, through a TLS proxy)",
        )
    ]
    if http.link_secret:
        findings.append(Finding("http", True, "approval links are signed with http.link_secret"))
    elif store is not None and store.settings.get(LINK_KEY_SETTING):
        findings.append(
            Finding("http", True, "approval links are signed with the key kept in the store")
        )
    else:
        findings.append(
            Finding(
                "http",
                True,
                "no link key yet: the daemon generates one on first start and keeps it in the"
                " store (set http.link_secret to choose your own)",
            )
        )
    return findings
