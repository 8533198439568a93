"""Value validators for the configuration: one value in, the normalised value out.

A leaf: the core's sections (config/core.py) and the integrations' settings
use these. Each returns the normalised value or raises ValueError with a
message that completes "<key>: ...". A value is quoted back only when it
cannot carry a credential (no user info, no query string); webhook URLs and
store URLs are never quoted back.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import SplitResult, urlsplit

from sebridge.kernel.redact import redact_url

__all__ = [
    "endpoint",
    "http_url",
    "listen",
    "local_url",
    "on_temp_disk",
    "public_url",
    "redact_url",
    "store_url",
    "webhook_url",
]

_LISTEN = re.compile(r"\[([^\]]+)\]:(\d{1,5})|([^\s:\[\]/]+):(\d{1,5})")
_LOCALHOSTS = ("127.0.0.1", "localhost", "::1")
_SQLITE_HELP = "sqlite:////absolute/path.db, sqlite:///relative/path.db or sqlite:// (in memory)"


def _got(value: str) -> str:
    return "" if "@" in value or "?" in value else f', got "{value}"'


def _split_http(value: str, *, show: bool = True) -> SplitResult:
    got = _got(value) if show else ""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        raise ValueError(f"is not a valid URL{got}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"must be an http:// or https:// URL{got}")
    return parts


def endpoint(value: str) -> str:
    """IMDS base URL: http(s)://host[:port], no path; returned without a trailing slash."""
    parts = _split_http(value)
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise ValueError(
            f"must be scheme://host[:port] without a path (sebridge adds the path){_got(value)}"
        )
    return value.rstrip("/")


def http_url(value: str, *, query: bool = True) -> str:
    """An http(s) URL with a host; with `query=False` also no query or fragment."""
    parts = _split_http(value)
    if not query and (parts.query or parts.fragment):
        raise ValueError("must not have a query string or fragment")
    return value


def public_url(value: str) -> str:
    """Base of approval links: http(s)://host[:port][/path], no query, user info or
    fragment; returned without a trailing slash."""
    parts = _split_http(value)
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError(
            "must be the base URL people reach sebridge at, without user info, query or"
            f" fragment (e.g. https://vm1.example.net){_got(value)}"
        )
    return value.rstrip("/")


def local_url(value: str) -> bool:
    """Whether an http(s) URL points at this machine (localhost, 127.0.0.1, ::1)."""
    return urlsplit(value).hostname in _LOCALHOSTS


def webhook_url(value: str) -> str:
    """An https URL (http only to localhost, for tests). Never quoted back: it is a secret."""
    parts = _split_http(value, show=False)
    if parts.scheme != "https" and parts.hostname not in _LOCALHOSTS:
        raise ValueError("must be an https:// URL (http:// is accepted only for localhost)")
    return value


def listen(value: str) -> tuple[str, int]:
    """Parse host:port (IPv6 as [::1]:8787) into (host, port)."""
    match = _LISTEN.fullmatch(value)
    if match is None:
        raise ValueError(f'must be host:port (IPv6 as [::1]:8787), got "{value}"')
    host = match.group(1) or match.group(3)
    port = int(match.group(2) or match.group(4))
    if match.group(1):
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f'"{host}" in brackets is not an IPv6 address') from None
    if port > 65535:
        raise ValueError(f"port {port} is out of range 0-65535")
    return host, port


def store_url(value: str) -> tuple[str, str]:
    """Return (backend, sqlite path): ("sqlite", path or ":memory:") or ("postgresql", "")."""
    if value in ("sqlite://", "sqlite:///:memory:"):
        return "sqlite", ":memory:"
    if value.startswith("sqlite:///") and len(value) > len("sqlite:///"):
        return "sqlite", value[len("sqlite:///") :]
    if value.startswith("sqlite:"):
        raise ValueError(f'must be {_SQLITE_HELP}, got "{value}"')
    if value.startswith(("postgresql://", "postgres://")):
        return "postgresql", ""
    scheme, sep, _ = value.partition("://")
    got = f'a URL with scheme "{scheme}"' if sep else f'"{value}"'
    raise ValueError(f"must be {_SQLITE_HELP} or postgresql://user@host/db, got {got}")


def on_temp_disk(path: str) -> bool:
    """Whether a file path is on Azure's temporary disk (/mnt, D:), wiped by Redeploy/Preempt."""
    path = path.replace("\\", "/")
    return path == "/mnt" or path.startswith("/mnt/") or path[:2].lower() == "d:"
