"""Every secret value the configuration holds, for masking what a hook prints.

A hook is the operator's program, and its output reaches every sink, the
store, the log and the approval page. Whatever it prints of sebridge's own
secrets is masked before any of them sees it (kernel/redact.py: Masker;
docs/ARCHITECTURE.md, "Readiness hooks"): every `Secret` of every section
(Slack's tokens, Jira's, the Teams webhook URL and the pieces of it a server
echoes, `link_secret`, a webhook's signing keys, extra headers and template
variables), whether inline, from `${VAR}` or from a `*_file`; each
variable's own value read into a secret ("Bearer ${TOKEN}"); the store
URL's password, with libpq's PGPASSWORD beside a PostgreSQL URL; and the
values a hook's `env` gives it (`check` shows them as *** too; a value
shorter than ENV_LEAST is a word, "web" or "1", and masking it would mangle
the output, not keep a secret).
Secrets are also masked in the forms common output gives them: `curl -v`'s
`Authorization: Basic` (base64 of `user:secret`, for each name the config
signs in with), SMTP's `AUTH PLAIN` (base64 of `\0user\0secret`), a secret's
own base64, and a key without its scheme prefix (`whsec_`).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import fields, is_dataclass
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from sebridge.config.core import CORE_SECTIONS
from sebridge.config.loader import Config
from sebridge.config.secrets import Secret
from sebridge.kernel.redact import url_secrets

__all__ = ["ENV_LEAST", "secret_values"]

ENV_LEAST = 6  # a hook's env value shorter than this is not masked (see above)
_PREFIX = re.compile(r"[a-z]{2,8}_(?=.{9})")  # "whsec_": a key's scheme prefix
_SIGN_IN_NAMES = ("email", "username", "user")  # the fields that name who signs in


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
    found += [v for hook in config.hooks.values() for v in hook.env.values() if len(v) >= ENV_LEAST]
    found += _forms(found, _sign_in_names(sections))
    return tuple(dict.fromkeys(v for v in found if v))


def _sign_in_names(sections: Iterable[Any]) -> list[str]:
    """The names the config signs in with (Jira's e-mail, SMTP's user name)."""
    return [
        value
        for section in sections
        if is_dataclass(section) and not isinstance(section, type)
        for f in fields(section)
        if f.name in _SIGN_IN_NAMES and isinstance(value := getattr(section, f.name), str) and value
    ]


def _b64(text: str) -> list[str]:
    """Base64 with its padding, and without it (as some programs print it)."""
    padded = base64.b64encode(text.encode("utf-8", "surrogatepass")).decode()
    return [padded, padded.rstrip("=")]


def _forms(secrets: list[str], names: list[str]) -> list[str]:
    """The forms output gives a secret: without its scheme prefix, its base64, and the base64
    of what HTTP Basic and SMTP AUTH PLAIN send (`user:secret`, `\0user\0secret`)."""
    found: list[str] = []
    for secret in secrets:
        prefix = _PREFIX.match(secret)
        if prefix:
            found.append(secret[prefix.end() :])
        found += _b64(secret)
        for name in names:
            found += [*_b64(f"{name}:{secret}"), *_b64(f"\0{name}\0{secret}")]
    return [f for f in found if len(f) >= ENV_LEAST]


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
