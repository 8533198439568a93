"""[imds] endpoint: scheme://host[:port], the path is ours."""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["split_endpoint"]


def split_endpoint(endpoint: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an endpoint; ValueError says what is wrong with it."""
    parts = urlsplit(endpoint.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"IMDS endpoint {endpoint!r} must look like http://host[:port]")
    if parts.path not in ("", "/") or parts.query:
        raise ValueError(f"IMDS endpoint {endpoint!r} must not carry a path or query")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ValueError(f"IMDS endpoint {endpoint!r} has an invalid port") from None
    return parts.scheme, parts.hostname, port
