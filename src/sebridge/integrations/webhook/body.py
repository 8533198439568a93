"""What a webhook POSTs for one transition: the transition's JSON, or a template's rendering.

The default body is the JSON line's public form (jsonl/sink.py, `record`) with a
`schema` field that names and versions it: a receiver keyed on the fields may rely
on them until the version changes (docs/channels/webhook.md). A template is a Jinja2 file
given by the operator (`template`): it renders the body from the same record, its
`vars` and `schema`; no autoescape (a body is JSON, not HTML): `tojson` writes a
value as JSON, every character outside ASCII as its \\u escape, so no text IMDS
sends can break the body or reach a receiver as a control character; `utc`
writes one of the record's times as "2026-11-27 08:14 UTC". A template
that renders only whitespace skips the transition: nothing is posted (a PagerDuty
alert template skips events nobody is paged for). The template runs in Jinja's
sandbox: it reads its context, nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from sebridge.integrations.jsonl.sink import record
from sebridge.integrations.samples import sample_messages
from sebridge.kernel import redact
from sebridge.kernel.errors import PermanentDeliveryError
from sebridge.model.message import Message, shown

__all__ = ["SCHEMA", "Body", "default_body", "to_json", "utc"]

SCHEMA = "sebridge.transition/1"
JSON = "application/json"


def to_json(value: Any) -> str:
    """`value` as compact JSON, ASCII only (the body's bytes are what is signed)."""
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"))


def public(message: Message) -> dict[str, Any]:
    """The record a body is made of: the schema, then the JSON line's fields, IMDS's text
    made displayable and bounded (model/message.py: shown)."""
    return {"schema": SCHEMA, **record(shown(message), maybe_repeat=message.maybe_sent)}


def _tojson(value: Any) -> str:
    """The templates' `tojson`: a name the context lacks is an error, not a JSON value."""
    if isinstance(value, jinja2.Undefined):
        str(value)  # StrictUndefined raises, naming what is missing
    return to_json(value)


def utc(value: Any) -> str:
    """An ISO 8601 time of the record as "2026-11-27 08:14 UTC"; other text as it is."""
    if not isinstance(value, str):
        return "" if value is None else str(value)
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return value  # IMDS's own text (not_before_text)
    if moment.tzinfo is None:
        return value
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def default_body(message: Message) -> str:
    """The body without a template: the record as JSON."""
    return to_json(public(message))


class Body:
    """Renders each transition's body: the default one, or the template at `path`.

    Args:
        name: the section's name, for errors.
        vars: the template's `vars` (secrets: a routing key), revealed.
        content_type: the body's type; a JSON body is parsed before it is sent, so a
            template that renders broken JSON fails at start or says so, not the receiver.
    """

    def __init__(
        self, name: str, path: str, vars: Mapping[str, str], content_type: str = JSON
    ) -> None:
        self._name = name
        self._path = path
        self._vars = dict(vars)
        self._json = content_type.split(";", maxsplit=1)[0].strip().lower().endswith("json")
        self._template: jinja2.Template | None = None
        if path:
            env = SandboxedEnvironment(
                undefined=jinja2.StrictUndefined,
                autoescape=False,
                keep_trailing_newline=False,
                trim_blocks=True,
                lstrip_blocks=True,
            )
            env.filters.update(tojson=_tojson, utc=utc)
            try:
                source = Path(path).read_text(encoding="utf-8")
                self._template = env.from_string(source)
            except (OSError, UnicodeDecodeError) as exc:
                raise PermanentDeliveryError(
                    f"{name}: template {path} cannot be read: {type(exc).__name__}"
                ) from None
            except jinja2.TemplateSyntaxError as exc:
                raise PermanentDeliveryError(
                    f"{name}: template {path} is broken: line {exc.lineno}: {exc.message}"
                ) from None

    def render(self, message: Message) -> str:
        """The body for `message` ("": skip it). A template that fails, or renders broken
        JSON, is a PermanentDeliveryError naming it (a retry would render the same)."""
        return self.render_record(public(message))

    def render_record(self, data: Mapping[str, Any]) -> str:
        """The body for a record (`render`'s, or `sebridge check --send-test`'s)."""
        if self._template is None:
            return to_json(data)
        try:
            text = self._template.render(record=data, vars=self._vars, schema=SCHEMA)
        except (jinja2.TemplateError, TypeError, ValueError, AttributeError) as exc:
            said = redact.scrub(str(exc), self._vars.values())  # a var may be a key
            raise PermanentDeliveryError(
                f"{self._name}: template {self._path} failed on a {data['transition']}"
                f" transition: {type(exc).__name__}: {said}"
            ) from None
        if not text.strip():
            return ""
        if self._json:
            try:
                json.loads(text)
            except ValueError as exc:
                raise PermanentDeliveryError(
                    f"{self._name}: template {self._path} rendered invalid JSON for a"
                    f" {data['transition']} transition ({exc}): write values with | tojson"
                ) from None
        return text

    def check(self) -> None:
        """Render every sample message (integrations/samples.py): a template that fails on
        one stops `run` and `check` now, naming it."""
        for message in sample_messages():
            self.render(message)
