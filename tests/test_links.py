"""Approval link tokens: what verifies, what does not, and where the key comes from."""

from __future__ import annotations

import base64
import secrets
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sebridge.cli.link_keys import link_signer
from sebridge.integrations.registry import config_from_mapping as from_mapping
from sebridge.kernel.errors import ConfigError
from sebridge.model import ScheduledEvent
from sebridge.store import Store
from sebridge.web.links import UNKNOWN_EXPIRY, LinkError, LinkSigner, approval_link

NOW = datetime(2026, 11, 23, 14, 0, tzinfo=UTC)
EVENT_ID = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"


def signer(key: str = "k" * 32, now: datetime = NOW) -> LinkSigner:
    return LinkSigner(key, clock=lambda: now)


def _flip(token: str, index: int) -> str:
    chars = list(token)
    chars[index] = "A" if chars[index] != "A" else "B"
    return "".join(chars)


def test_a_token_names_its_event_until_it_expires() -> None:
    token = signer().token(EVENT_ID, NOW + timedelta(minutes=15))
    assert signer().verify(token) == EVENT_ID
    assert signer(now=NOW + timedelta(minutes=15)).verify(token) == EVENT_ID
    with pytest.raises(LinkError, match="expired"):
        signer(now=NOW + timedelta(minutes=15, seconds=1)).verify(token)


def test_tokens_are_url_safe() -> None:
    token = signer().token(EVENT_ID + "?&/#=+", NOW + timedelta(minutes=15))
    assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")


@pytest.mark.parametrize("event_id", ["SURR\ud800ID", "ID\x00NUL", "\udcff\n\u202e"])
def test_any_id_text_gets_a_token_that_names_it(event_id: str) -> None:
    """The dispatcher makes links outside its guarded send: a token must never raise."""
    token = signer().token(event_id, NOW + timedelta(minutes=15))
    assert signer().verify(token) == event_id


def _forged_expiry() -> str:
    """A token whose payload was edited to a later expiry, keeping the old MAC."""
    token = signer().token(EVENT_ID, NOW + timedelta(minutes=1))
    mac = token.split(".")[1]
    later = f"{EVENT_ID}\n{int((NOW + timedelta(days=9)).timestamp())}".encode()
    return base64.urlsafe_b64encode(later).rstrip(b"=").decode() + "." + mac


def _other_event() -> str:
    """The MAC of one event's token glued to another event's payload."""
    one = signer().token(EVENT_ID, NOW + timedelta(minutes=15))
    other = signer().token("0000", NOW + timedelta(minutes=15))
    return other.split(".")[0] + "." + one.split(".")[1]


@pytest.mark.parametrize(
    ("token", "why"),
    [
        (_flip(signer().token(EVENT_ID, NOW + timedelta(minutes=15)), 3), "payload edited"),
        (_flip(signer().token(EVENT_ID, NOW + timedelta(minutes=15)), -3), "MAC edited"),
        (signer("another key").token(EVENT_ID, NOW + timedelta(minutes=15)), "other key"),
        (_forged_expiry(), "expiry pushed back"),
        (_other_event(), "MAC of another event"),
        ("", "empty"),
        ("no-dot", "no MAC"),
        ("a.b.c", "two dots"),
        ("%%%.%%%", "not base64"),
        ("x" * 600 + ".y", "too long"),
        (signer().token(EVENT_ID, NOW + timedelta(minutes=15)).split(".")[0] + ".", "MAC cut"),
    ],
)
def test_tampered_or_malformed_tokens_are_refused(token: str, why: str) -> None:
    with pytest.raises(LinkError):
        signer().verify(token)


def _lenient(part: str) -> bytes:
    return base64.urlsafe_b64decode(part.rstrip("=") + "=" * (-len(part.rstrip("=")) % 4))


def _respelled(how: str) -> str:
    """A valid token written another way that decodes to the same bytes."""
    token = signer().token(EVENT_ID + "??>>", NOW + timedelta(minutes=15))
    body, mac = token.split(".")
    if how == "padded":
        return f"{body}{'=' * (-len(body) % 4)}.{mac}{'=' * (-len(mac) % 4)}"
    if how == "standard alphabet":
        return token.translate(str.maketrans("-_", "+/"))
    if how == "stray characters":
        return f"{body[:4]}!{body[4:]}.{mac}"
    # The MAC's 32 bytes leave 2 unused bits in its last character: set them.
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet[alphabet.index(mac[-1]) | 1]
    return f"{body}.{mac[:-1]}{last}"


@pytest.mark.parametrize(
    "how", ["padded", "standard alphabet", "stray characters", "unused bits set"]
)
def test_only_the_spelling_we_emit_is_accepted(how: str) -> None:
    token = signer().token(EVENT_ID + "??>>", NOW + timedelta(minutes=15))
    assert "-" in token or "_" in token  # the alphabets differ in this one
    other = _respelled(how)
    assert other != token
    if how != "stray characters":  # the decoder links used before took each as the same bytes
        assert [_lenient(p) for p in other.split(".")] == [_lenient(p) for p in token.split(".")]
    assert signer().verify(token) == EVENT_ID + "??>>"
    with pytest.raises(LinkError, match="malformed"):
        signer().verify(other)


def test_an_event_without_notbefore_gets_a_bounded_link() -> None:
    event = ScheduledEvent(EVENT_ID, "Reboot", "Scheduled", not_before_text="soon")
    token = signer().token_for(event)
    assert signer(now=NOW + UNKNOWN_EXPIRY).verify(token) == EVENT_ID
    with pytest.raises(LinkError):
        signer(now=NOW + UNKNOWN_EXPIRY + timedelta(seconds=1)).verify(token)


def test_an_event_link_expires_at_notbefore() -> None:
    event = ScheduledEvent(EVENT_ID, "Reboot", "Scheduled", not_before=NOW + timedelta(minutes=5))
    url = approval_link("https://vm1.example.net/sebridge", signer())(event)
    prefix = "https://vm1.example.net/sebridge/approve/"
    assert url.startswith(prefix)
    token = url[len(prefix) :]
    assert signer(now=NOW + timedelta(minutes=5)).verify(token) == EVENT_ID
    with pytest.raises(LinkError):
        signer(now=NOW + timedelta(minutes=6)).verify(token)


def test_the_signer_never_shows_its_key() -> None:
    secret = "s3cr3t-link-key-0123456789"
    assert secret not in repr(LinkSigner(secret))
    with pytest.raises(ValueError):
        LinkSigner("")


# ------------------------------------------------------------------ config and the key's origin


def _config(tmp_path: Path, **http: str) -> dict[str, object]:
    return {"store": {"url": f"sqlite:///{tmp_path / 'state.db'}"}, "http": http}


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("https://vm1.example.net/", "https://vm1.example.net"),
        ("https://vm1.example.net/sebridge//", "https://vm1.example.net/sebridge"),
        ("http://127.0.0.1:8787", "http://127.0.0.1:8787"),
    ],
)
def test_public_url_is_kept_without_trailing_slash(given: str, kept: str, tmp_path: Path) -> None:
    config = from_mapping(_config(tmp_path, public_url=given), environ={})
    assert config.http.public_url == kept
    assert not config.warnings


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("vm1.example.net", "http:// or https://"),
        ("ftp://vm1.example.net", "http:// or https://"),
        ("https://vm1.example.net/?a=1", "without user info, query or fragment"),
        ("https://user:pw@vm1.example.net", "without user info, query or fragment"),
        ("https://vm1.example.net/#x", "without user info, query or fragment"),
    ],
)
def test_bad_public_urls_are_refused(given: str, says: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"http\.public_url") as caught:
        from_mapping(_config(tmp_path, public_url=given), environ={})
    assert says in str(caught.value)
    assert "pw" not in str(caught.value)


def test_plain_http_public_url_is_warned_about(tmp_path: Path) -> None:
    config = from_mapping(_config(tmp_path, public_url="http://vm1.example.net"), environ={})
    assert any("plain http://" in w for w in config.warnings)


def test_a_key_is_generated_once_and_kept_in_the_store(tmp_path: Path) -> None:
    config = from_mapping(_config(tmp_path, public_url="https://vm1.example.net"), environ={})
    store = Store(config.store.url)
    first = link_signer(config, store)
    assert first is not None
    token = first.token(EVENT_ID, datetime.now(UTC) + timedelta(minutes=5))
    store.close()
    store = Store(config.store.url)  # a restart, or another agent of the fleet
    again = link_signer(config, store)
    assert again is not None and again.verify(token) == EVENT_ID
    store.close()


def test_a_configured_key_wins_and_is_not_stored(tmp_path: Path) -> None:
    key_file = tmp_path / "link.key"
    key_file.write_text("configured-key-Vq3t9Lk2Xw7Rp4Zs8Mn1\n")
    config = from_mapping(
        _config(tmp_path, public_url="https://vm1.example.net", link_secret_file=str(key_file)),
        environ={},
    )
    store = Store(config.store.url)
    configured = link_signer(config, store)
    assert configured is not None
    token = configured.token(EVENT_ID, datetime.now(UTC) + timedelta(minutes=5))
    assert LinkSigner("configured-key-Vq3t9Lk2Xw7Rp4Zs8Mn1").verify(token) == EVENT_ID
    assert store.settings.get("link_secret") is None
    store.close()
    assert b"configured-key" not in (tmp_path / "state.db").read_bytes()


@pytest.mark.parametrize("variant", ["link_secret", "link_secret_file"])
def test_a_short_configured_key_is_refused_naming_the_key(variant: str, tmp_path: Path) -> None:
    short = "k7q-short-key-0123456789abcdef"  # 30 bytes: guessed from one link in seconds
    value = short
    if variant == "link_secret_file":
        value = str(tmp_path / "link.key")
        (tmp_path / "link.key").write_text(short + "\n")
    with pytest.raises(ConfigError) as caught:
        from_mapping(_config(tmp_path, public_url="https://vm1.example.net", **{variant: value}))
    said = str(caught.value)
    assert f"http.{variant}: is shorter than 32 bytes" in said
    assert "openssl rand -base64 32" in said
    assert short not in said and "30" not in said


def test_a_32_byte_key_is_taken() -> None:
    key = "éàüöäçñßøåæœèêëî"  # 16 characters, 32 bytes
    config = from_mapping({"http": {"link_secret": key}}, environ={})
    assert config.http.link_secret.reveal() == key


@pytest.mark.parametrize("variant", ["link_secret", "link_secret_file", "environment"])
def test_a_key_is_read_one_way_without_the_whitespace_around_it(
    variant: str, tmp_path: Path
) -> None:
    key = "configured-key-Vq3t9Lk2Xw7Rp4Zs8Mn1"
    given = f"  {key} \t\n"
    http: dict[str, str] = {"link_secret": given}
    environ: dict[str, str] = {}
    if variant == "link_secret_file":
        (tmp_path / "link.key").write_text(given)
        http = {"link_secret_file": str(tmp_path / "link.key")}
    elif variant == "environment":
        http, environ = {"link_secret": "${LINK_KEY}"}, {"LINK_KEY": given}
    config = from_mapping({"http": http}, environ=environ)
    assert config.http.link_secret.reveal() == key


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("abc" + " " * 29, "is shorter than 32 bytes (whitespace around it aside)"),
        ("a" * 44, "is too predictable (runs or repeats, as a person types)"),
        ("abc" * 15, "is too predictable (runs or repeats, as a person types)"),
        ("0123456789" * 4, "is too predictable (runs or repeats, as a person types)"),
        ("password" * 4, "is too predictable (runs or repeats, as a person types)"),
        ("sebridge-link-key-abcdefghijklmnopqrstuvwxyz", "is too predictable"),
    ],
)
def test_a_weak_key_is_refused_naming_why(value: str, why: str) -> None:
    with pytest.raises(ConfigError) as caught:
        from_mapping({"http": {"link_secret": value}}, environ={})
    said = str(caught.value)
    assert f"http.link_secret: {why}" in said
    assert value.strip() not in said


@pytest.mark.parametrize(
    "make",
    [
        lambda: base64.b64encode(secrets.token_bytes(32)).decode(),  # openssl rand -base64 32
        lambda: secrets.token_hex(32),  # openssl rand -hex 32
        lambda: secrets.token_urlsafe(32),
    ],
)
def test_a_generated_key_is_taken(make: Callable[[], str]) -> None:
    for _ in range(200):
        key = make()
        config = from_mapping({"http": {"link_secret": key}}, environ={})
        assert config.http.link_secret.reveal() == key


def test_no_public_url_no_links(tmp_path: Path) -> None:
    config = from_mapping(_config(tmp_path), environ={})
    store = Store(config.store.url)
    assert link_signer(config, store) is None
    assert store.settings.get("link_secret") is None
    store.close()
