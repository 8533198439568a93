"""Which proxy the environment names for a URL: HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and
NO_PROXY, as urllib reads them (the lower-case name first), and NO_PROXY's networks as
requests reads them too (`10.0.0.0/8`). Read at each call: a variable set later counts.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

__all__ = ["proxy_for"]


def proxy_for(url: str) -> str | None:
    """The proxy the environment names for `url`, unless NO_PROXY sends it direct; as
    urllib and requests read them."""
    from urllib.request import getproxies, proxy_bypass  # not loaded on IMDS's path

    parts = urlsplit(url)
    host = parts.hostname or ""
    proxies = getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or not host or proxy_bypass(host):
        return None
    for entry in proxies.get("no", "").replace(" ", "").split(","):
        if "/" in entry and _in_network(host, entry):
            return None
    return proxy


def _in_network(host: str, network: str) -> bool:
    """NO_PROXY's `10.0.0.0/8` covers 10.1.2.3 (requests reads it so; urllib does not)."""
    try:
        return ipaddress.ip_address(host) in ipaddress.ip_network(network, strict=False)
    except ValueError:
        return False
