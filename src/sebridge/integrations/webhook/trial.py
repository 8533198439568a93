"""A webhook's part of `sebridge check`, and its test delivery (`check --send-test`).

Nothing answers for a webhook without taking a delivery: HEAD and OPTIONS mean
nothing to most receivers (PagerDuty, chat webhooks answer them 404 or 405), so
`check` tries no request; it says what it can tell without one (the URL's host,
the keys, the template rendered on every sample) and that it posted nothing.
`--send-test` posts one signed delivery whose `transition` is "test", through the
template when there is one (a template may render it as it likes, or skip it).
"""

from __future__ import annotations

import secrets
from urllib.parse import urlsplit

from sebridge.integrations.base import Finding, TrialNote
from sebridge.integrations.jsonl.trial import trial_line
from sebridge.integrations.webhook.body import SCHEMA
from sebridge.integrations.webhook.settings import WebhookSettings, signing_keys
from sebridge.integrations.webhook.sink import WebhookSink
from sebridge.kernel.errors import DeliveryError

__all__ = ["check_webhook", "send_trial"]


def check_webhook(name: str, s: WebhookSettings, *, send_test: bool = False) -> list[Finding]:
    """What can be told without posting; a template that fails on a sample is a problem."""
    from sebridge.integrations.webhook import build_sink

    try:
        build_sink(name, s).check_templates()
    except DeliveryError as exc:
        return [Finding(name, False, str(exc).removeprefix(f"{name}: "))]
    keys = len(signing_keys(s.secret.reveal()))
    body = f"template {s.template}" if s.template else f"the transition's JSON ({SCHEMA})"
    tried = (
        "; a signed test delivery is posted to try it (--send-test)"
        if send_test
        else "; nothing is posted to test it (`sebridge check --send-test` posts a signed test"
        " delivery)"
    )
    return [
        Finding(
            name,
            True,
            f"posts {body} to {_origin(s.url.reveal())}, signed with {keys} key"
            + ("s (a rotation)" if keys > 1 else "")
            + tried,
        )
    ]


def send_trial(name: str, sink: WebhookSink, note: TrialNote) -> Finding:
    """Post the test record once, signed, under a fresh webhook-id."""
    try:
        body = sink.body.render_record({"schema": SCHEMA, **trial_line(note)})
        if not body:
            return Finding(
                name,
                True,
                'the template renders nothing for a "test" transition: no test delivery posted',
            )
        status = sink.post("msg_test_" + secrets.token_hex(12), body)
    except DeliveryError as exc:
        said = str(exc).removeprefix(f"{name}: ").removesuffix("; will retry")
        return Finding(name, False, f"test delivery not taken: {said}")
    finally:
        sink.close()
    return Finding(name, True, f'signed test delivery taken (HTTP {status}, "transition":"test")')


def _origin(url: str) -> str:
    """scheme://host[:port]: what may be shown of a webhook URL (its path and query may
    carry its token)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host  # IPv6
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}"
