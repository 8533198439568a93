"""The gate in front of Bolt in HTTP mode: signature first, then shape, then Bolt.

Bolt parses a body before it checks the signature, so an unsigned `payload=x`
used to reach a JSON decoder and end in a 500 and a traceback. Here a request
whose signature is missing, wrong or older than five minutes gets 401, and a
signed one that is not a Slack payload gets 400, each with one log line.
Bolt verifies the signature again; that costs microseconds.
"""

from __future__ import annotations

import io
import json
import logging
import urllib.parse
from collections.abc import Iterable
from typing import Any

from slack_sdk.signature import SignatureVerifier

from sebridge.kernel.wsgi import StartResponse, WsgiApp

__all__ = ["guarded"]

log = logging.getLogger(__name__)


def guarded(app: WsgiApp, signing_secret: str) -> WsgiApp:
    """`app` behind signature and payload checks (POST only)."""
    verifier = SignatureVerifier(signing_secret)

    def gate(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        peer = environ.get("REMOTE_ADDR", "?")
        if environ.get("REQUEST_METHOD") != "POST":
            return _answer(start_response, "405 Method Not Allowed", [("Allow", "POST")])
        body = _read(environ)
        try:
            body.decode("utf-8")  # the verifier decodes it too, and would raise
        except UnicodeDecodeError:
            log.warning("refused a Slack request from %s: the body is not UTF-8", peer)
            return _answer(start_response, "400 Bad Request")
        if not _signed(verifier, body, environ):
            log.warning("refused a Slack request from %s: missing, bad or stale signature", peer)
            return _answer(start_response, "401 Unauthorized")
        problem = _malformed(body, environ.get("CONTENT_TYPE", ""))
        if problem:
            log.warning("refused a signed Slack request from %s: %s", peer, problem)
            return _answer(start_response, "400 Bad Request")
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        return app(environ, start_response)

    return gate


def _read(environ: dict[str, Any]) -> bytes:
    # waitress has already refused anything over the server's body cap (413).
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    data: bytes = environ["wsgi.input"].read(length) if length > 0 else b""
    return data


def _signed(verifier: SignatureVerifier, body: bytes, environ: dict[str, Any]) -> bool:
    timestamp = environ.get("HTTP_X_SLACK_REQUEST_TIMESTAMP")
    signature = environ.get("HTTP_X_SLACK_SIGNATURE")
    if not timestamp or not signature or not timestamp.isdigit():
        return False
    return verifier.is_valid(body=body, timestamp=timestamp, signature=signature)


def _malformed(body: bytes, content_type: str) -> str | None:
    """Why a signed UTF-8 body is not a Slack payload, or None when it is one."""
    text = body.decode("utf-8")
    if content_type.startswith("application/json"):
        return _not_an_object(text, "the JSON body")
    form = urllib.parse.parse_qs(text, keep_blank_values=True)
    if "payload" in form:
        return _not_an_object(form["payload"][0], "the payload field")
    if "command" in form or "ssl_check" in form:  # slash commands and Slack's SSL check
        return None
    return "neither a payload field nor a JSON body"


def _not_an_object(text: str, what: str) -> str | None:
    try:
        value = json.loads(text)
    except ValueError:
        return f"{what} is not JSON"
    return None if isinstance(value, dict) else f"{what} is not a JSON object"


def _answer(
    start_response: StartResponse, status: str, headers: list[tuple[str, str]] | None = None
) -> list[bytes]:
    start_response(status, [("Content-Length", "0"), *(headers or [])])
    return []
