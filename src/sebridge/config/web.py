"""[web]: the fleet page (`/fleet`, `/fleet.json`) and its calendar feed, and who may see them.

Off by default. The page names the person from a header an authenticating proxy
in front of it sets (oauth2-proxy, an Entra application proxy), believed only
from the proxies' addresses (`trusted_proxies`). See docs/fleet-page.md.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, replace

from sebridge.config.reader import Reader, option

__all__ = ["WebConfig", "check_web"]

# A header's name as HTTP spells one (RFC 9110 token characters).
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


@dataclass(frozen=True)
class WebConfig:
    """[web]: the fleet page and its calendar feed (docs/fleet-page.md)."""

    # true: serve /fleet, /fleet.json and /calendar/<token>.ics on [http] listen; false: 404.
    page: bool = False
    # Events that ended within this many days are shown beside the open ones.
    recent_days: int = option(7, ge=1, le=90, why="three months")
    # The addresses (CIDRs) of the authenticating proxy in front: only a request from one of
    # them names its person by user_header; any other request is refused (401).
    trusted_proxies: tuple[str, ...] = ("127.0.0.1/32", "::1/128")
    # The header that proxy sets to the signed-in person (oauth2-proxy: X-Forwarded-User;
    # with --set-xauthrequest X-Auth-Request-User, or X-Forwarded-Email).
    user_header: str = "X-Forwarded-User"

    @property
    def networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        """trusted_proxies, parsed (check_web refused any that is not a CIDR)."""
        return tuple(ipaddress.ip_network(c) for c in self.trusted_proxies)

    @property
    def environ_key(self) -> str:
        """user_header as WSGI's environ names it: X-Forwarded-User -> HTTP_X_FORWARDED_USER."""
        return "HTTP_" + self.user_header.upper().replace("-", "_")


def check_web(web: WebConfig, rd: Reader) -> WebConfig:
    """Each trusted proxy a CIDR (an address alone is one host), the header a header's name;
    returns [web] with the CIDRs in their canonical spelling."""
    cidrs: list[str] = []
    for given in web.trusted_proxies:
        try:
            cidrs.append(str(ipaddress.ip_network(given.strip(), strict=True)))
        except ValueError as exc:
            why = str(exc)
            if "host bits set" in why:
                wide = ipaddress.ip_network(given.strip(), strict=False)
                why = f"host bits set: did you mean {wide}?"
            rd.error("web.trusted_proxies", f'"{given}" is not a CIDR ({why})')
    if not _TOKEN.fullmatch(web.user_header):
        rd.error("web.user_header", f'"{web.user_header}" is not an HTTP header name')
    if web.page and not web.trusted_proxies:
        rd.error(
            "web.trusted_proxies",
            "empty: with web.page = true every request would be refused; name the"
            " authenticating proxy's address, e.g. 127.0.0.1/32",
        )
    if len(cidrs) != len(web.trusted_proxies):
        return web
    return replace(web, trusted_proxies=tuple(cidrs))
