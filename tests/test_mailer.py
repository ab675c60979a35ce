"""Message building and the two transports (SMTP against a real aiosmtpd server, outbox)."""

from __future__ import annotations

import dataclasses
import email
from collections.abc import Callable
from email import policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any, cast

import pytest
from helpers import free_port
from smtp import SmtpServer

from bot import mailer
from bot.config import Settings
from bot.errors import DeliveryError
from bot.mailer import (
    UNSUBSCRIBE_PLACEHOLDER,
    DigestMessage,
    OutboxSender,
    PermanentFailure,
    SmtpSender,
    TemporaryFailure,
)

HTML = f'<html><body><p>你好，读者</p><a href="{UNSUBSCRIBE_PLACEHOLDER}">退订</a></body></html>'
TEXT = f"你好，读者\n退订：{UNSUBSCRIBE_PLACEHOLDER}\n"


def parse(data: bytes) -> EmailMessage:
    return cast(EmailMessage, email.message_from_bytes(data, policy=policy.default))


def test_placeholder_is_the_one_render_uses() -> None:
    from bot import render

    assert mailer.UNSUBSCRIBE_PLACEHOLDER == render.UNSUBSCRIBE_PLACEHOLDER


def test_digest_message_headers_and_parts(settings: Settings) -> None:
    message = DigestMessage(settings, "强化学习周报 · 2026-W40", HTML, TEXT)
    url = "https://digest.example.org/unsubscribe/abc.def"
    msg = parse(message.render("reader@example.com", "<id.1@news.example.org>", url,
                               unsubscribe_token="abc.def.ghi"))

    assert msg["To"] == "reader@example.com"
    assert msg["From"].addresses[0].addr_spec == "digest@news.example.org"
    assert msg["From"].addresses[0].display_name == "强化学习周报"
    assert msg["Reply-To"] == "editor@example.org"
    assert msg["Subject"] == "强化学习周报 · 2026-W40"
    assert msg["Date"].datetime is not None
    assert msg["Message-ID"] == "<id.1@news.example.org>"
    assert msg["List-Id"] == "<digest.news.example.org>"
    assert msg["List-Unsubscribe"] == (
        f"<{url}>, <mailto:digest@news.example.org?subject=unsubscribe%20abc.def.ghi>")
    assert msg["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert msg.get_content_type() == "multipart/alternative"
    parts = list(msg.iter_parts())
    assert [p.get_content_type() for p in parts] == ["text/plain", "text/html"]
    text, html = (cast(str, p.get_content()) for p in parts)
    assert "你好，读者" in text and url in text and UNSUBSCRIBE_PLACEHOLDER not in text
    assert f'href="{url}"' in html and UNSUBSCRIBE_PLACEHOLDER not in html
    assert all(p.get_content_charset() == "utf-8" for p in parts)


def test_every_line_is_short_and_crlf(settings: Settings) -> None:
    long_html = HTML.replace("你好", "长" * 5000)
    data = DigestMessage(settings, "s", long_html, TEXT).render(
        "a@example.com", "<x@news.example.org>", "https://x.example/u/t")
    lines = data.split(b"\r\n")
    assert b"\n" not in b"".join(lines)
    assert max(len(line) for line in lines) <= 78
    assert data.isascii()


def test_each_recipient_gets_its_own_link(settings: Settings) -> None:
    message = DigestMessage(settings, "s", HTML, TEXT)
    one = parse(message.render("a@example.com", "<1@news.example.org>", "https://x/u/AAA"))
    two = parse(message.render("b@example.com", "<2@news.example.org>", "https://x/u/BBB"))
    assert "https://x/u/AAA" in one.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    assert "https://x/u/BBB" in two.get_body(("html",)).get_content()  # type: ignore[union-attr]
    assert "AAA" not in str(two) and "BBB" not in str(one)


def test_header_injection_through_subject_and_body(make_settings: Callable[..., Settings]) -> None:
    # refused at start (tests/test_settings_bounds.py); the mailer holds on its own too
    settings = dataclasses.replace(make_settings(),
                                   from_addr="Digest\r\nBcc: evil@example.net <digest@example.org>")
    subject = "Week 40\r\nBcc: evil@example.net\nX-Injected: yes"
    body = "title\r\nBcc: evil@example.net\r\n\r\nbody"
    data = DigestMessage(settings, subject, body, body).render(
        "a@example.com", "<1@example.org>", "https://x/u/t")
    msg = parse(data)
    assert msg.get_all("Bcc") is None and msg.get_all("X-Injected") is None
    assert msg["Subject"] == "Week 40 Bcc: evil@example.net X-Injected: yes"
    header_block = data.split(b"\r\n\r\n", 1)[0]
    assert b"\r\nBcc:" not in header_block and b"\r\nX-Injected" not in header_block


@pytest.mark.parametrize("field", ["to", "message_id", "url"])
def test_per_recipient_values_cannot_carry_line_breaks(settings: Settings, field: str) -> None:
    message = DigestMessage(settings, "s", HTML, TEXT)
    values = {"to": "a@example.com", "message_id": "<1@x>", "url": "https://x/u/t"}
    values[field] += "\r\nBcc: evil@example.net"
    with pytest.raises(ValueError):
        message.render(values["to"], values["message_id"], values["url"])


def test_envelope_address_needs_an_address() -> None:
    assert mailer.envelope_address("Name <a@b.example>") == "a@b.example"
    with pytest.raises(DeliveryError):
        mailer.envelope_address("just a name")


def test_simple_message_is_multipart(settings: Settings) -> None:
    message_id, data = mailer.simple_message(settings, "a@example.com", "确认\r\nBcc: x@y",
                                             "text body", "<p>html body</p>")
    msg = parse(data)
    assert msg["Message-ID"] == message_id and message_id.endswith("@news.example.org>")
    assert msg["Subject"] == "确认 Bcc: x@y" and msg.get_all("Bcc") is None
    assert [p.get_content_type() for p in msg.iter_parts()] == ["text/plain", "text/html"]


# --- outbox ---------------------------------------------------------------------------------

def test_outbox_writes_one_file_per_message_id(tmp_path: Path, settings: Settings) -> None:
    outbox = OutboxSender(tmp_path / "outbox")
    data = DigestMessage(settings, "s", HTML, TEXT).render("a@example.com", "<m.1@x>", "https://x")
    outbox.send("d@x", "a@example.com", data, "<m.1@x>")
    outbox.send("d@x", "a@example.com", data, "<m.1@x>")  # a resend after a crash
    outbox.send("d@x", "b@example.com", data, "<m.2@x>")
    files = sorted(p.name for p in (tmp_path / "outbox").iterdir())
    assert files == ["m.1@x.eml", "m.2@x.eml"]  # no temp files left behind
    assert (tmp_path / "outbox" / "m.1@x.eml").read_bytes() == data


def test_outbox_reports_an_unwritable_folder(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(DeliveryError, match="cannot write to the outbox"):
        OutboxSender(blocker / "outbox").send("d@x", "a@x", b"data", "<1@x>")


def test_make_sender_picks_the_transport(make_settings: Callable[..., Settings]) -> None:
    assert isinstance(mailer.make_sender(make_settings()), OutboxSender)
    assert isinstance(mailer.make_sender(make_settings(smtp_host="127.0.0.1")), SmtpSender)


# --- SMTP -------------------------------------------------------------------------------------

def smtp(server: SmtpServer, **kwargs: Any) -> SmtpSender:
    return SmtpSender(server.host, server.port, security="none", timeout=5, **kwargs)


def test_smtp_sends_over_one_connection(smtp_server: SmtpServer, settings: Settings) -> None:
    sender = smtp(smtp_server)
    message = DigestMessage(settings, "s", HTML, TEXT)
    for n in range(3):
        to = f"r{n}@example.com"
        sender.send("digest@news.example.org", to,
                    message.render(to, f"<{n}@news.example.org>", f"https://x/u/{n}"), "")
    sender.close()
    received = smtp_server.wait_for(3)
    assert [m.rcpt_tos for m in received] == [("r0@example.com",), ("r1@example.com",),
                                              ("r2@example.com",)]
    assert {m.mail_from for m in received} == {"digest@news.example.org"}
    assert len(smtp_server.handler.sessions) == 1
    assert received[1].message["List-Unsubscribe"].startswith("<https://x/u/1>")


def test_smtp_reply_codes_become_failures(smtp_server: SmtpServer) -> None:
    sender = smtp(smtp_server)
    smtp_server.script("RCPT", "550 5.1.1 no such user", address="gone@example.com")
    smtp_server.script("DATA", "451 4.3.0 try again later")
    with pytest.raises(PermanentFailure) as permanent:
        sender.send("d@example.org", "gone@example.com", b"Subject: x\r\n\r\nbody\r\n", "")
    assert permanent.value.code == 550
    with pytest.raises(TemporaryFailure) as temporary:
        sender.send("d@example.org", "ok@example.com", b"Subject: x\r\n\r\nbody\r\n", "")
    assert temporary.value.code == 451 and not temporary.value.connection
    sender.send("d@example.org", "ok@example.com", b"Subject: x\r\n\r\nbody\r\n", "")
    assert len(smtp_server.wait_for(1)) == 1
    assert len(smtp_server.handler.sessions) == 1  # 4xx/5xx keep the connection
    sender.close()


def test_smtp_dropped_connection_is_reopened(smtp_server: SmtpServer) -> None:
    sender = smtp(smtp_server)
    sender.send("d@example.org", "a@example.com", b"Subject: 1\r\n\r\nx\r\n", "")
    smtp_server.script("MAIL", drop=True)
    with pytest.raises(TemporaryFailure) as dropped:
        sender.send("d@example.org", "b@example.com", b"Subject: 2\r\n\r\nx\r\n", "")
    assert dropped.value.connection
    sender.send("d@example.org", "b@example.com", b"Subject: 2\r\n\r\nx\r\n", "")
    sender.close()
    assert [m.rcpt_tos[0] for m in smtp_server.wait_for(2)] == ["a@example.com", "b@example.com"]
    assert len(smtp_server.handler.sessions) == 2


def test_smtp_421_closes_and_reconnects(smtp_server: SmtpServer) -> None:
    sender = smtp(smtp_server)
    smtp_server.script("MAIL", "421 4.3.2 shutting down")
    with pytest.raises(TemporaryFailure) as closing:
        sender.send("d@example.org", "a@example.com", b"Subject: 1\r\n\r\nx\r\n", "")
    assert closing.value.connection and closing.value.code == 421
    sender.send("d@example.org", "a@example.com", b"Subject: 1\r\n\r\nx\r\n", "")
    sender.close()
    assert len(smtp_server.wait_for(1)) == 1


def test_smtp_server_down_is_a_connection_failure() -> None:
    sender = SmtpSender("127.0.0.1", free_port(), security="none", timeout=2)
    with pytest.raises(TemporaryFailure, match="cannot connect") as down:
        sender.send("d@example.org", "a@example.com", b"x\r\n", "")
    assert down.value.connection


def test_smtp_starttls_required_but_not_offered(smtp_server: SmtpServer) -> None:
    sender = SmtpSender(smtp_server.host, smtp_server.port, security="starttls", timeout=5)
    with pytest.raises(DeliveryError, match="STARTTLS") as exc:
        sender.send("d@example.org", "a@example.com", b"x\r\n", "")
    assert exc.value.hint and "DIGESTBOT_SMTP_SECURITY" in exc.value.hint


def test_smtp_sender_refused_for_good_is_a_delivery_error(smtp_server: SmtpServer) -> None:
    smtp_server.script("MAIL", "553 5.7.1 not allowed to send as that address")
    with pytest.raises(DeliveryError, match="refused our sender address"):
        smtp(smtp_server).send("d@example.org", "a@example.com", b"x\r\n", "")


@pytest.mark.parametrize("offset", [0, 1, 2, 3, 56, 57, 58, 114, 200])
def test_bodies_round_trip_wherever_the_link_sits(settings: Settings, offset: int) -> None:
    """Each part is base64-encoded once up to the link and per recipient after it."""
    html = "前" * offset + f'<a href="{UNSUBSCRIBE_PLACEHOLDER}">x</a>' + "后\n" * 40
    text = "t" * offset + UNSUBSCRIBE_PLACEHOLDER + "\nend " + UNSUBSCRIBE_PLACEHOLDER
    message = DigestMessage(settings, "s", html, text)
    for link in ("https://x/u/a", "https://x/u/" + "b" * 100):
        msg = parse(message.render("a@example.com", "<1@x>", link))
        got_text, got_html = (p.get_content() for p in msg.iter_parts())
        assert got_text == ("t" * offset + link + "\nend " + link).replace("\n", "\r\n") + ""
        assert got_html == html.replace(UNSUBSCRIBE_PLACEHOLDER, link).replace("\n", "\r\n")


def test_a_digest_without_personal_link_is_sent_as_is(settings: Settings) -> None:
    message = DigestMessage(settings, "s", "<p>no link</p>", "no link")
    msg = parse(message.render("a@example.com", "<1@x>", "https://x/u/t"))
    assert [p.get_content() for p in msg.iter_parts()] == ["no link", "<p>no link</p>"]


def test_smtp_ready_runs_after_the_commands_and_before_the_data(
    smtp_server: SmtpServer,
) -> None:
    sender = smtp(smtp_server)
    seen: list[tuple[int, int, int]] = []

    def ready() -> None:
        commands = smtp_server.handler.commands
        seen.append((commands["MAIL"], commands["RCPT"], len(smtp_server.messages)))

    sender.send("d@example.org", "a@example.com", b"Subject: 1\r\n\r\nx\r\n", "", ready=ready)
    assert seen == [(1, 1, 0)]
    assert len(smtp_server.wait_for(1)) == 1

    def not_ready() -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        sender.send("d@example.org", "b@example.com", b"Subject: 2\r\n\r\nx\r\n", "",
                    ready=not_ready)
    sender.send("d@example.org", "c@example.com", b"Subject: 3\r\n\r\nx\r\n", "")
    sender.close()
    received = smtp_server.wait_for(2)
    assert [m.rcpt_tos[0] for m in received] == ["a@example.com", "c@example.com"]


def test_outbox_ready_runs_before_the_file_appears(tmp_path: Path) -> None:
    outbox = OutboxSender(tmp_path)

    def not_ready() -> None:
        raise OSError("disk full")

    with pytest.raises(OSError):
        outbox.send("d@x", "a@x", b"data", "<1@x>", ready=not_ready)
    assert list(tmp_path.iterdir()) == []
    outbox.send("d@x", "a@x", b"data", "<1@x>", ready=lambda: None)
    assert [p.name for p in tmp_path.iterdir()] == ["1@x.eml"]


def test_the_mailto_carries_the_token_or_is_left_out(settings: Settings) -> None:
    """The List-Unsubscribe mailto: is the way to unsubscribe by mail, so it
    exists only with the recipient's signed token (the bounce mailbox acts on
    nothing else), and a token can add no header."""
    message = DigestMessage(settings, "s", HTML, TEXT)
    bare = parse(message.render("a@example.com", "<1@x>", "https://x/u/t"))
    assert bare["List-Unsubscribe"] == "<https://x/u/t>"
    with pytest.raises(ValueError):
        message.render("a@example.com", "<1@x>", "https://x/u/t", unsubscribe_token="t\r\nBcc: x@y")
