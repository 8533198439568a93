"""[email]: the keys, their defaults, and what is refused (plaintext sign-in, bad addresses)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sebridge.integrations.registry import config_from_mapping
from sebridge.kernel.errors import ConfigError

BASE = {"host": "smtp.example.com", "from": "sebridge@example.com", "to": ["ops@example.com"]}


def read(**keys: Any) -> Any:
    return config_from_mapping({"email": {**BASE, **keys}}, environ={}).section("email")


def refused(**keys: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        read(**keys)
    return str(caught.value)


def test_defaults_starttls_on_587_and_implicit_tls_on_465() -> None:
    s = read()
    assert (s.port, s.starttls, s.tls, s.timeout, s.sender) == (
        587,
        True,
        False,
        30.0,
        "sebridge@example.com",
    )
    assert read(tls=True).port == 465
    assert read(tls=True, port=2465).port == 2465
    assert read(timeout="2m").timeout == 120.0


def test_off_without_a_host_and_other_keys_need_it() -> None:
    config = config_from_mapping({}, environ={})
    assert "email" not in config.given
    said = refused(host="")
    assert "email.host is empty; it is required when [email] sets from, to" in said


@pytest.mark.parametrize("host", ["smtp.example.com", "10.0.0.5", "mail"])
def test_a_password_without_tls_is_refused_naming_the_keys(host: str) -> None:
    said = refused(host=host, starttls=False, username="bot", password="pw-123456")
    assert "email.username: signing in without TLS would send the password in the clear" in said
    assert "email.starttls = true" in said and "email.tls = true" in said
    assert "pw-123456" not in said


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "::1", "[::1]", "127.0.0.2"])
def test_a_loopback_relay_may_take_a_password_in_plain_text(host: str) -> None:
    assert read(host=host, starttls=False, username="bot", password="pw").username == "bot"


def test_no_tls_and_no_password_is_only_warned() -> None:
    config = config_from_mapping({"email": {**BASE, "starttls": False}}, environ={})
    assert any("mail to smtp.example.com travels unencrypted" in w for w in config.warnings)


@pytest.mark.parametrize(
    ("keys", "said"),
    [
        ({"from": ""}, "email.from is empty; it is required"),
        ({"from": "not an address"}, "email.from: is not a mail address"),
        ({"to": []}, "email.to is empty; it is required"),
        ({"to": ["ops@example.com", "a@b.example, c@d.example"]}, "email.to[2]: must be one"),
        ({"to": ["ops@example.com\nBcc: x@evil.example"]}, "email.to[1]: must be one address"),
        ({"username": "bot"}, "email.password is empty; it is required with email.username"),
        ({"password": "pw"}, "email.username is empty; it is required with email.password"),
        ({"host": "smtp://mail.example.com"}, "email.host: must be a host name or an IP"),
        ({"port": 70000}, "email.port: must be <= 65535"),
        ({"sender": "a@example.com"}, 'unknown key "sender" in [email]'),
    ],
)
def test_what_is_refused_names_its_key(keys: dict[str, Any], said: str) -> None:
    assert said in refused(**keys)


def test_an_unreadable_ca_file_is_refused(tmp_path: Path) -> None:
    junk = tmp_path / "ca.pem"
    junk.write_text("not a certificate\n", encoding="utf-8")
    assert "email.ca_file: cannot be read as PEM certificates" in refused(ca_file=str(junk))
    assert "email.ca_file: cannot be read" in refused(ca_file=str(tmp_path / "missing.pem"))


def test_the_password_from_a_file_and_redacted(tmp_path: Path) -> None:
    secret = tmp_path / "smtp-password"
    secret.write_text("from-a-File-42\n", encoding="utf-8")
    config = config_from_mapping(
        {"email": {**BASE, "username": "bot", "password_file": str(secret)}}, environ={}
    )
    assert config.section("email").password.reveal() == "from-a-File-42"
    shown = config.redacted()["email"]
    assert shown["password"] == "***" and shown["from"] == "sebridge@example.com"


def test_reading_the_section_loads_neither_smtplib_nor_the_sink() -> None:
    """`run` imports smtplib and the sink only to build a configured e-mail sink."""
    probe = (
        "import sys\n"
        "from sebridge.integrations.registry import config_from_mapping\n"
        f"config_from_mapping({{'email': {BASE!r}}}, environ={{}})\n"
        "print(sorted(m for m in sys.modules if m == 'smtplib' or m.startswith("
        "'sebridge.integrations.email.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.strip() == "['sebridge.integrations.email.settings']"
