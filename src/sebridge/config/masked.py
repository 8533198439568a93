"""Every secret value the configuration holds, for masking what a hook prints.

A hook is the operator's program, and its output reaches every sink, the
store, the log and the approval page. Whatever it prints of sebridge's own
secrets is masked before any of them sees it (kernel/redact.py: Masker;
docs/ARCHITECTURE.md, "Readiness hooks"): every `Secret` of every section
(Slack's tokens, Jira's, the Teams webhook URL and the pieces of it a server
echoes, `link_secret`, a webhook's signing keys, extra headers and template
variables), whether inline, from `${VAR}` or from a `*_file`; each
variable's own value read into a secret ("Bearer ${TOKEN}"); and the store
URL's password, with libpq's PGPASSWORD beside a PostgreSQL URL.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import fields, is_dataclass
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from sebridge.config.core import CORE_SECTIONS
from sebridge.config.loader import Config
from sebridge.config.secrets import Secret
from sebridge.kernel.redact import url_secrets

__all__ = ["secret_values"]


def secret_values(config: Config) -> tuple[str, ...]:
    """The texts to mask, each once (a config loaded without secrets has none of its own)."""
    found: list[str] = []
    sections = [getattr(config, name) for name in CORE_SECTIONS] + list(config.sections.values())
    for secret in (*_secrets(sections), *config.secret_parts):
        if secret.is_unread or not secret:
            continue
        value = secret.reveal()
        found.append(value)
        if "://" in value:  # a webhook URL: what a server may echo of it
            found += url_secrets(value)
    found += _store_passwords(config.store.url)
    return tuple(dict.fromkeys(v for v in found if v))


def _secrets(value: Any) -> Iterator[Secret]:
    """Every Secret in a section, its nested tables and arrays of tables."""
    if isinstance(value, Secret):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _secrets(item)
    elif isinstance(value, Mapping):  # a table of secrets (a webhook's extra headers)
        for item in value.values():
            yield from _secrets(item)
    elif is_dataclass(value) and not isinstance(value, type):
        for f in fields(value):
            yield from _secrets(getattr(value, f.name))


def _store_passwords(url: str) -> list[str]:
    """The store URL's password, in the user info or the query, as written and decoded."""
    try:
        parts = urlsplit(url)
        found = [unquote(parts.password or "")]
    except ValueError:
        return []
    found += parse_qs(parts.query).get("password", [])  # (decoded already)
    return [form for p in found if p for form in (p, quote(p, safe=""))]
