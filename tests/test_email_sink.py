"""The e-mail sink against a real SMTP server (aiosmtpd on 127.0.0.1, tests/fakes/smtp.py).

TLS verified (a certificate trusted through ca_file delivers; one for another name, or
from an unknown CA, is refused for good, naming why), implicit TLS, AUTH PLAIN and LOGIN,
the SMTP reply codes (4xx retried, 5xx permanent and quoted, a refused sign-in naming the
keys, never the password), the parts and the thread headers as received, and `check`.
"""

from __future__ import annotations

import contextlib
import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fakes.smtp import FakeSmtp, certificate
from helpers import free_port
from sebridge.cli.main import main
from sebridge.imds.simulator import Simulator
from sebridge.integrations.base import TrialNote
from sebridge.integrations.email import Email
from sebridge.integrations.email.mail import message_id
from sebridge.integrations.registry import REGISTRY, config_from_mapping, context
from sebridge.integrations.render import Renderer
from sebridge.kernel.errors import PermanentDeliveryError, RetryableDeliveryError
from sebridge.model import ScheduledEvent, Transition, TransitionKind
from sebridge.model.message import Message, Sink

USER, PASSWORD = "bot@example.com", "correct-Horse-battery-9"
NOT_BEFORE = datetime(2030, 5, 4, 8, 14, 7, tzinfo=UTC)
LINK = "https://sebridge.example.net/approve/abc.def"
(EMAIL,) = [i for i in REGISTRY if isinstance(i, Email)]


def event(description: str = "Host maintenance") -> ScheduledEvent:
    return ScheduledEvent(
        "C7061BAC-AFDC-4513-B24B-AA5F13A16123",
        "Reboot",
        "Scheduled",
        ("web1", "web2"),
        not_before=NOT_BEFORE,
        description=description,
        source="Platform",
        duration_seconds=-1,
    )


def message(kind: str = TransitionKind.SCHEDULED, tid: int = 1, **more: Any) -> Message:
    e = more.pop("event", None) or event()
    t = Transition(kind, e, NOT_BEFORE - timedelta(minutes=14), actor=more.pop("actor", None))
    return Message(t, "web1", "ask", transition_id=tid, **more)


@pytest.fixture
def smtp() -> Iterator[FakeSmtp]:
    with FakeSmtp(users={USER: PASSWORD}) as fake:
        yield fake


def section(fake: FakeSmtp, **keys: Any) -> dict[str, Any]:
    return {
        "host": "127.0.0.1",
        "port": fake.port,
        "ca_file": str(fake.cert.cert),
        "username": USER,
        "password": PASSWORD,
        "from": "sebridge <sebridge@example.com>",
        "to": ["ops@example.com", "Duty <duty@example.com>"],
        **keys,
    }


def ctx(keys: dict[str, Any], **more: Any) -> Any:
    config = config_from_mapping({"email": keys, **more}, environ={})
    return context(EMAIL, config, Renderer())


def sink(keys: dict[str, Any]) -> Sink:
    built = EMAIL.sink(ctx(keys))
    assert built is not None
    return built


# -- TLS ---------------------------------------------------------------------------------------


def test_starttls_with_a_trusted_certificate_delivers_signed_in(smtp: FakeSmtp) -> None:
    sink(section(smtp)).send(message())
    (mail,) = smtp.mails
    assert mail.tls and mail.user == USER
    assert mail.sender == "sebridge@example.com"
    assert mail.recipients == ["ops@example.com", "duty@example.com"]
    assert [(m, u, ok) for m, u, ok in smtp.logins] == [("PLAIN", USER, True)]


def test_auth_login_when_plain_is_not_offered() -> None:
    with FakeSmtp(users={USER: PASSWORD}, mechanisms=("LOGIN",)) as fake:
        sink(section(fake)).send(message())
        assert fake.logins == [("LOGIN", USER, True)] and fake.mails[0].user == USER


@pytest.mark.parametrize(
    ("names", "ca", "cause"),
    [
        (("wrong.example",), True, "IP address mismatch"),  # trusted, for another name
        (("127.0.0.1", "localhost"), False, "self-signed certificate"),  # no ca_file
    ],
)
def test_a_certificate_that_does_not_verify_is_refused_for_good(
    names: tuple[str, ...], ca: bool, cause: str
) -> None:
    with FakeSmtp(cert=certificate(*names), users={USER: PASSWORD}) as fake:
        keys = section(fake) if ca else {k: v for k, v in section(fake).items() if k != "ca_file"}
        with pytest.raises(PermanentDeliveryError) as caught:
            sink(keys).send(message())
        assert cause in str(caught.value)
        assert "email.host must be a name the certificate is for" in str(caught.value)
        assert fake.mails == [] and fake.logins == []  # no password went to that server


def test_a_host_name_the_certificate_is_for_verifies(smtp: FakeSmtp) -> None:
    sink(section(smtp, host="localhost")).send(message())
    assert smtp.mails[0].tls


def test_implicit_tls_on_its_own_port() -> None:
    with FakeSmtp(tls="implicit", users={USER: PASSWORD}) as fake:
        sink(section(fake, tls=True)).send(message())
        assert fake.mails[0].tls and fake.mails[0].user == USER


def test_a_server_without_starttls_is_refused_before_the_password() -> None:
    with FakeSmtp(tls="none") as fake:
        with pytest.raises(PermanentDeliveryError) as caught:
            sink(section(fake)).send(message())
        assert "does not offer STARTTLS: set email.tls = true" in str(caught.value)
        assert fake.mails == []


def test_plain_text_to_a_loopback_relay_without_a_password() -> None:
    with FakeSmtp(tls="none") as fake:
        keys = {k: v for k, v in section(fake, starttls=False).items() if k != "ca_file"}
        del keys["username"], keys["password"]
        sink(keys).send(message())
        assert not fake.mails[0].tls and fake.mails[0].user is None


# -- replies -------------------------------------------------------------------------------


def test_a_4xx_is_retried_and_a_5xx_fails_quoting_the_server(smtp: FakeSmtp) -> None:
    s = sink(section(smtp))
    smtp.answer_next(f"451 4.7.1 greylisted, come back later {PASSWORD}")
    with pytest.raises(RetryableDeliveryError) as retried:
        s.send(message())
    assert "451 4.7.1 greylisted, come back later ***; will retry" in str(retried.value)
    smtp.answer_next("552 5.3.4 message too big for this system")
    with pytest.raises(PermanentDeliveryError) as failed:
        s.send(message())
    assert "refused the mail: 552 5.3.4 message too big for this system" in str(failed.value)
    assert smtp.mails == []
    s.send(message())
    assert len(smtp.mails) == 1


def test_a_refused_sign_in_names_the_keys_and_never_the_password(smtp: FakeSmtp) -> None:
    with pytest.raises(PermanentDeliveryError) as caught:
        sink(section(smtp, password="not-the-Password-1")).send(message())
    said = str(caught.value)
    assert "refused the sign-in (535" in said
    assert "check email.username and email.password" in said
    assert "not-the-Password-1" not in said and smtp.mails == []


def test_nothing_listening_is_retried() -> None:
    keys = {"host": "127.0.0.1", "port": free_port(), "starttls": False}
    keys.update({"from": "a@example.com", "to": ["b@example.com"]})
    with pytest.raises(RetryableDeliveryError, match=r"cannot reach 127\.0\.0\.1"):
        sink(keys).send(message())


# -- the mail as received ------------------------------------------------------------------


def test_text_and_html_parts_and_one_thread_per_event(smtp: FakeSmtp) -> None:
    s = sink(section(smtp))
    first = message(approve_url=LINK)
    receipt = s.send(first)
    assert receipt is not None
    approved = message(
        TransitionKind.APPROVED, tid=2, actor="alice", receipt=receipt, approved_by="alice"
    )
    assert s.send(approved) is None  # the thread's receipt stays the first mail's
    one, two = smtp.mails
    subject = "Reboot of web1, web2 at 08:14 UTC: approval asked"
    assert one.message["Subject"] == subject
    assert two.message["Subject"] == "Re: " + subject
    root = one.message["Message-ID"]
    assert root.endswith("@example.com>") and root == receipt.external_id
    assert two.message["In-Reply-To"] == root and two.message["References"] == root
    assert two.message["Message-ID"] != root
    assert one.message["Auto-Submitted"] == "auto-generated"
    text, html = one.part("plain"), one.part("html")
    for part in (text, html):
        assert "Reboot of web1 (this VM), web2" in part and "2030-05-04 08:14:07 UTC" in part
        assert LINK in part and "nothing is approved until you press its button" in part
    assert f'<a href="{LINK}"' in html
    assert "Approved by alice" in two.part("plain") and LINK not in two.part("plain")


def test_a_retry_of_one_delivery_keeps_its_message_id_and_each_transition_has_its_own(
    smtp: FakeSmtp,
) -> None:
    s = sink(section(smtp))
    s.send(message())
    s.send(replace(message(), attempt=1))  # the answer was lost: sent again
    s.send(message(tid=2))
    ids = [m.message["Message-ID"] for m in smtp.mails]
    assert ids[0] == ids[1] != ids[2]


def test_hostile_imds_text_cannot_add_markup_to_the_html(smtp: FakeSmtp) -> None:
    hostile = '</p><script>alert("x")</script><a href="https://evil.example">Approve</a>'
    sink(section(smtp)).send(message(event=event(hostile), approve_url=LINK))
    html = smtp.mails[0].part("html")
    assert "<script>" not in html and 'href="https://evil.example"' not in html
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    assert html.count("<a ") == 1  # the approval link, ours
    assert hostile in smtp.mails[0].part("plain")  # text shows it as written


def test_no_link_when_the_event_cannot_be_approved(smtp: FakeSmtp) -> None:
    sink(section(smtp)).send(replace(message(approve_url=LINK), policy="inform"))
    (mail,) = smtp.mails
    assert mail.message["Subject"] == "Reboot of web1, web2 at 08:14 UTC: for information"
    assert LINK not in mail.part("plain") and LINK not in mail.part("html")


# -- sebridge check ------------------------------------------------------------------------


def test_check_opens_a_session_and_sends_nothing(smtp: FakeSmtp) -> None:
    (found, links) = EMAIL.check(ctx(section(smtp)))
    assert found.ok and found.target == "email"
    assert "(STARTTLS)" in found.message and "certificate verified for 127.0.0.1" in found.message
    assert f"signed in as {USER}" in found.message and "no mail sent" in found.message
    assert "approval links are off" in links.message
    assert smtp.mails == [] and smtp.logins[-1] == ("PLAIN", USER, True)


def test_check_says_what_failed(smtp: FakeSmtp) -> None:
    (found,) = EMAIL.check(ctx(section(smtp, password="wrong-Password-77")))
    assert not found.ok
    assert "refused the sign-in" in found.message and "email.password" in found.message
    assert "wrong-Password-77" not in found.message


def test_send_test_sends_one_mail(smtp: FakeSmtp) -> None:
    note = TrialNote("sebridge test message from web1: no action needed", "web1")
    (found,) = EMAIL.send_test(ctx(section(smtp)), note)
    assert found.ok and "ops@example.com" in found.message
    (mail,) = smtp.mails
    assert mail.message["Subject"] == "sebridge test message from web1"
    assert note.text in mail.part("plain")


@pytest.mark.usefixtures("hermetic")
def test_sebridge_check_through_the_cli(smtp: FakeSmtp, tmp_path: Path) -> None:
    """`sebridge check` says what the session found and sends nothing; --send-test one mail."""
    keys = section(smtp)
    lines = [f"{k} = {json.dumps(v)}" for k, v in keys.items()]
    store = json.dumps(f"sqlite:///{tmp_path / 'state.db'}")
    path = tmp_path / "sebridge.toml"

    def check(*extra: str) -> tuple[int, str]:
        out = io.StringIO()
        # check asks IMDS always (with vm_name set, for its compute name too): a simulator
        # of this VM answers.
        with Simulator(port=0, vm_name="vm7") as imds:
            path.write_text(
                f'[imds]\nendpoint = {json.dumps(imds.url)}\nvm_name = "vm7"\n'
                f"[store]\nurl = {store}\n[email]\n" + "\n".join(lines) + "\n"
            )
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                code = main(["check", "--config", str(path), *extra])
        return code, out.getvalue()

    code, out = check()
    assert code == 0, out
    assert "ok: email: 127.0.0.1:" in out and f"signed in as {USER}" in out
    assert smtp.mails == [] and PASSWORD not in out
    code, out = check("--send-test")
    assert code == 0, out
    assert "ok: email: test mail taken by 127.0.0.1:" in out
    (mail,) = smtp.mails
    assert "vm7" in mail.message["Subject"] and "no action needed" in mail.part("plain")


def test_recipients_refused_while_others_take_the_mail_are_logged(
    smtp: FakeSmtp, caplog: pytest.LogCaptureFixture
) -> None:
    smtp.refuse_rcpt["duty@example.com"] = "550 5.1.1 no such user"
    sink(section(smtp)).send(message())  # delivered: sending again would repeat it to ops
    (mail,) = smtp.mails
    assert mail.recipients == ["ops@example.com"]
    assert "refused duty@example.com: 550 5.1.1 no such user" in caplog.text


@pytest.mark.parametrize(
    ("reply", "error", "said"),
    [
        ("450 4.2.1 mailbox busy", RetryableDeliveryError, "deferred every recipient"),
        ("550 5.1.1 no such user", PermanentDeliveryError, "check email.to"),
    ],
)
def test_every_recipient_refused(
    smtp: FakeSmtp, reply: str, error: type[Exception], said: str
) -> None:
    smtp.refuse_rcpt.update({"ops@example.com": reply, "duty@example.com": reply})
    with pytest.raises(error) as caught:
        sink(section(smtp)).send(message())
    assert said in str(caught.value) and f"ops@example.com: {reply}" in str(caught.value)
    assert smtp.mails == []


def test_each_section_mailing_a_transition_gives_it_a_message_id_of_its_own() -> None:
    m = message()
    ids = {message_id(m, "example.com", s) for s in ("email", "email.oncall", "email")}
    assert len(ids) == 2
    assert message_id(m, "example.com", "email") == message_id(
        replace(m, attempt=3), "example.com", "email"
    )


class DrippingServer:
    """A TCP server on 127.0.0.1 that accepts and sends `text` one byte every `every` s (a
    banner a tarpit drips: each byte comes well within a read timeout, the whole never)."""

    def __init__(self, text: bytes, every: float) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._text, self._every = text, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> DrippingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._listener.close()
        self._thread.join(5)

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            conn, _ = self._listener.accept()
            with conn:
                for byte in self._text:
                    if self._stop.wait(self._every):
                        return
                    conn.sendall(bytes([byte]))


def test_a_dripped_banner_holds_the_sink_no_longer_than_its_timeout() -> None:
    """Issue 37, item 5: the timeout bounds the whole session, not each read."""
    banner = b"220 " + b"x" * 60 + b" ESMTP\r\n"  # about 33 s at one byte per 0.5 s
    with DrippingServer(banner, every=0.5) as server:
        keys = {"host": "127.0.0.1", "port": server.port, "starttls": False, "timeout": "1s"}
        keys.update({"from": "a@example.com", "to": ["b@example.com"]})
        began = time.monotonic()
        with pytest.raises(RetryableDeliveryError) as caught:
            sink(keys).send(message())
        held = time.monotonic() - began
    assert str(caught.value) == (
        f"email: 127.0.0.1:{server.port} did not finish answering within 1 s (email.timeout bounds the"
        " whole delivery); will retry"
    )
    assert held < 10  # bounded by the timeout (about 1 s), not by the drip (about 33 s)


def test_the_folded_readiness_mail_says_it_and_lists_each_vm(smtp: FakeSmtp) -> None:
    """Issue 34, finding 15: mail hears the hook steps as one `ready` message."""
    from sebridge.model.readiness import VmReadiness, VmState

    s = sink(section(smtp))
    receipt = s.send(message())
    e = event()
    t = Transition(
        TransitionKind.READY, e, NOT_BEFORE, note="not ready: web2: failed: drain exit 1"
    )
    vms = (
        VmReadiness("web1", VmState.READY),
        VmReadiness("web2", VmState.FAILED, "drain", "exit 1"),
    )
    s.send(Message(t, "web1", "ask", transition_id=2, receipt=receipt, readiness=vms))
    text = smtp.mails[1].part("plain")
    assert text.startswith("Readiness: not ready: web2: failed: drain exit 1.")
    assert "- web1: ready\n- web2: failed: drain exit 1" in text
    assert "web2: failed: drain exit 1" in smtp.mails[1].part("html")
