"""A webhook's section: its keys and the checks across them.

`name` below is the section's name as the registry hands it (`webhook` today;
one instance's name once an integration may be configured several times):
nothing here assumes it. The URL is a secret (a webhook URL often carries its
token in its path or query): messages never quote it. The signing keys are
Standard Webhooks secrets, `whsec_` and the base64 of 24 to 64 random bytes;
during a key rotation `secret` holds several, separated by spaces, and every
delivery carries one signature per key.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from sebridge.config.checks import webhook_url
from sebridge.config.durations import Seconds
from sebridge.config.reader import Reader, option
from sebridge.config.secrets import Secret

__all__ = ["KEY_BYTES", "KEY_PREFIX", "MAKE_KEY", "WebhookSettings", "signing_keys", "validate"]

KEY_PREFIX = "whsec_"
# The Standard Webhooks specification asks for 24 to 64 random bytes: fewer is guessable,
# and a key decoded to more was most likely something else pasted there.
KEY_BYTES = (24, 64)
_UNSET = Secret()
MAKE_KEY = (
    "python3 -c 'import base64, secrets;"
    ' print("whsec_" + base64.b64encode(secrets.token_bytes(32)).decode())\''
)
# An HTTP header name (RFC 9110's token).
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# Names the sink writes itself: the signature's, and the framing of the body.
_OURS = re.compile(r"webhook-.*|content-length|transfer-encoding|host", re.IGNORECASE)
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # a line break would forge a header


@dataclass(frozen=True)
class WebhookSettings:
    """A webhook: on when url is set."""

    # Where each transition is POSTed: https://, or http:// to this machine only. The
    # webhook is on when it is set.
    url: Secret = _UNSET
    # The Standard Webhooks signing key(s), whsec_..., newest first, separated by spaces
    # during a rotation; required with url.
    secret: Secret = _UNSET
    # A Jinja2 file rendering the body; empty: the transition's JSON.
    template: str = ""
    # Extra request headers (secrets), e.g. { Authorization = "Bearer ${TOKEN}" }.
    headers: Mapping[str, Secret] = field(default_factory=dict)
    # Values the template reads as `vars` (secrets).
    vars: Mapping[str, Secret] = field(default_factory=dict)
    # Seconds to wait for the answer.
    timeout: Seconds = option(10.0, gt=0.0, le=120.0)

    @property
    def enabled(self) -> bool:
        return bool(self.url)


def signing_keys(secret: str) -> list[str]:
    """The `whsec_` keys of a `secret` value, newest first (several during a rotation)."""
    return secret.split()


def validate(s: WebhookSettings, rd: Reader, name: str) -> WebhookSettings:
    """The URL's scheme, the signing keys' form, the template's file, the headers' names."""
    if not s.enabled:
        return s
    if s.url.is_unread:  # a command that sends nothing: only the shape of what is set
        _check_template(s.template, rd, name)
        return s
    try:
        webhook_url(s.url.reveal())
    except ValueError as exc:
        rd.error(rd.secret_key(f"{name}.url"), str(exc))
    if not s.secret:
        rd.required(
            f"{name}.secret",
            "to sign every delivery (Standard Webhooks; a receiver that checks nothing ignores"
            f" the signature headers): make one with {MAKE_KEY}, and give the receiver the same",
        )
    else:
        keys = signing_keys(s.secret.reveal())
        _check_keys(keys, rd, rd.secret_key(f"{name}.secret"))
        if len(keys) > 1:  # each key alone is a secret too: a hook's output masks it
            rd.env.secret_parts.extend(keys)
    _check_template(s.template, rd, name)
    for header, value in s.headers.items():
        key = f"{name}.headers.{header}"
        if not _HEADER_NAME.fullmatch(header):
            rd.error(key, "is not a valid HTTP header name")
        elif _OURS.fullmatch(header):
            rd.error(key, "is set by sebridge itself (the signature, the body's length): remove it")
        elif _BAD_VALUE.search(value.reveal()):
            rd.error(key, "holds a line break or a control character")
    return replace(s, url=Secret(s.url.reveal().strip()))


def _check_keys(keys: list[str], rd: Reader, key: str) -> None:
    """Each key `whsec_` + base64 of 24 to 64 bytes; errors never show a key, nor its length."""
    for n, one in enumerate(keys, 1):
        which = f"key {n} of {len(keys)}" if len(keys) > 1 else "the key"
        if not one.startswith(KEY_PREFIX):
            rd.error(
                key, f'{which} does not start with "{KEY_PREFIX}" (a Standard Webhooks secret)'
            )
            continue
        body = one[len(KEY_PREFIX) :]
        try:
            raw = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
        except (binascii.Error, ValueError):
            rd.error(key, f'{which} is not base64 after "{KEY_PREFIX}"')
            continue
        low, high = KEY_BYTES
        if not low <= len(raw) <= high:
            rd.error(
                key, f"{which} must decode to {low} to {high} bytes (32 random bytes is usual)"
            )
    if len(set(keys)) != len(keys):
        rd.error(key, "holds the same key twice")


def _check_template(path: str, rd: Reader, name: str) -> None:
    """A template file that can be read (it is compiled and tried when the sink is built)."""
    if path and not os.path.isfile(path):
        rd.error(f"{name}.template", f"{path} is not a file")
    elif path and not os.access(path, os.R_OK):
        rd.error(f"{name}.template", f"{path} cannot be read")
