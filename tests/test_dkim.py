"""DKIM: a key made by `digestbot dkim keygen`, a real digest sent through the
real SMTP server, each received message verified by dkimpy against the
public key the command printed; a changed body or header fails."""

from __future__ import annotations

import email
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import BASE_URL, FEED_FIXTURE, FROM_ADDR, REPLY_TO, FreshDB
from smtp import SmtpServer, add_subscribers
from test_digest import poll_fixture

from bot import mailer, subscriptions
from bot.cli import cli
from bot.config import Settings
from bot.mailer import dkim
from bot.mailer.outgoing import OutgoingSender
from bot.models import Subscriber
from bot.send import send_digest
from bot.tokens import Tokens

SELECTOR = "test2026"
READERS = ["ada@example.com", "grace@example.org"]


def keygen(tmp_path: Path) -> tuple[Path, dkim.DnsRecord]:
    """`digestbot dkim keygen`: the key file, and the record it says to publish."""
    key = tmp_path / "dkim" / f"{SELECTOR}.pem"
    env = {"DIGESTBOT_DATABASE_URL": f"sqlite:///{tmp_path / 'unused.sqlite3'}",
           "DIGESTBOT_FEED_URLS": str(FEED_FIXTURE), "DIGESTBOT_FROM_ADDR": FROM_ADDR,
           "DIGESTBOT_CONFIG": ""}
    result = CliRunner().invoke(cli, ["dkim", "keygen", "--selector", SELECTOR, "--out", str(key)],
                                env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    name = re.search(r"name:\s+(\S+)", result.output)
    value = re.search(r"value:\s+(v=DKIM1; k=rsa; p=\S+)", result.output)
    assert name and value, result.output
    assert name.group(1) == f"{SELECTOR}._domainkey.news.example.org"
    assert key.stat().st_mode & 0o777 == 0o600
    return key, dkim.DnsRecord(name.group(1), value.group(1))


@pytest.fixture
def signed(tmp_path: Path, make_settings: Callable[..., Settings],
           smtp_server: SmtpServer) -> tuple[Settings, dkim.DnsRecord]:
    key, record = keygen(tmp_path)
    settings = make_settings(base_url=BASE_URL, from_addr=FROM_ADDR, reply_to=REPLY_TO,
                             dkim_key_file=str(key), dkim_selector=SELECTOR,
                             **smtp_server.settings_env())
    return settings, record


def verify(data: bytes, record: dkim.DnsRecord) -> dkim.Verdict:
    return dkim.verify(data, dkim.file_dnsfunc(record))


def test_every_digest_verifies_and_a_changed_one_does_not(
        fresh_db: FreshDB, smtp_server: SmtpServer,
        signed: tuple[Settings, dkim.DnsRecord]) -> None:
    settings, record = signed
    poll_fixture(settings, fresh_db.factory)
    add_subscribers(fresh_db.factory, READERS)
    report = send_digest(settings, fresh_db.factory, "2026-W40")
    assert report.sent == len(READERS), report
    received = smtp_server.wait_for(len(READERS))
    for mail in received:
        verdict = verify(mail.data, record)
        assert verdict.ok, verdict.problem
        msg = email.message_from_bytes(mail.data)
        tags = dict(t.strip().split("=", 1) for t in " ".join(msg["DKIM-Signature"].split()).split(";")
                    if "=" in t)
        assert (tags["a"], tags["c"], tags["d"], tags["s"]) == (
            "rsa-sha256", "relaxed/relaxed", "news.example.org", SELECTOR)
        signed_headers = [h.strip() for h in tags["h"].split(":")]
        for name in ("from", "to", "subject", "date", "message-id", "list-unsubscribe",
                     "list-unsubscribe-post", "mime-version", "content-type"):
            assert name in signed_headers, name
        # signed after the personal link went in: the body holds this reader's link
        html = next(p for p in msg.walk() if p.get_content_type() == "text/html")
        body = html.get_payload(decode=True).decode()
        assert mailer.UNSUBSCRIBE_PLACEHOLDER not in body and f"{BASE_URL}/unsubscribe/" in body

    data = received[0].data
    head, body = data.split(b"\r\n\r\n", 1)
    # relaxed/relaxed: trailing spaces and re-folded headers still verify
    relaxed = head.replace(b"\r\nList-Unsubscribe-Post:", b"\r\nList-Unsubscribe-Post:  ") + \
        b"\r\n\r\n" + body.replace(b"\r\n", b" \r\n", 3)
    assert verify(relaxed, record).ok
    # one changed character of the base64 body: the body hash no longer matches
    line = re.search(rb"\r\n([A-Za-z0-9+/]{76})\r\n", body)
    assert line
    tampered_line = line.group(1)[:10] + (b"A" if line.group(1)[10:11] != b"A" else b"B") + line.group(1)[11:]
    tampered = head + b"\r\n\r\n" + body.replace(line.group(1), tampered_line, 1)
    verdict = verify(tampered, record)
    assert not verdict.ok and "body hash" in verdict.problem, verdict.problem
    # a changed signed header
    other = verify(data.replace(b"\r\nTo: ", b"\r\nTo: eve@example.net, ", 1), record)
    assert not other.ok
    # and another key (a record for a different key) does not verify it either
    stranger = dkim.dns_record(SELECTOR, "news.example.org", dkim.public_key_b64(dkim.generate_key()))
    assert not verify(data, stranger).ok


def test_confirmation_and_test_mails_are_signed(fresh_db: FreshDB, smtp_server: SmtpServer,
                                                signed: tuple[Settings, dkim.DnsRecord]) -> None:
    settings, record = signed
    poll_fixture(settings, fresh_db.factory)
    [sub_id] = add_subscribers(fresh_db.factory, ["new.reader@example.com"], status="pending")
    with fresh_db.factory() as session:
        sub = session.get(Subscriber, sub_id)
        assert sub is not None
        sender = mailer.make_sender(settings)
        try:
            subscriptions.send_confirmation(settings, Tokens.from_settings(settings), sender, sub)
        finally:
            sender.close()
    send_digest(settings, fresh_db.factory, "2026-W40", to="editor@example.org")
    received = smtp_server.wait_for(2)
    for mail in received:
        assert verify(mail.data, record).ok, email.message_from_bytes(mail.data)["Subject"]


def test_dkim_check_command(tmp_path: Path, fresh_db: FreshDB) -> None:
    key, _ = keygen(tmp_path)
    env = {"DIGESTBOT_DATABASE_URL": fresh_db.url, "DIGESTBOT_FEED_URLS": str(FEED_FIXTURE),
           "DIGESTBOT_FROM_ADDR": FROM_ADDR, "DIGESTBOT_CONFIG": "",
           "DIGESTBOT_DKIM_KEY_FILE": str(key), "DIGESTBOT_DKIM_SELECTOR": SELECTOR}
    runner = CliRunner()
    ok = runner.invoke(cli, ["dkim", "check"], env=env, catch_exceptions=False)
    assert ok.exit_code == 0 and ok.output.startswith("ok: a test message signed"), ok.output
    assert f"{SELECTOR}._domainkey.news.example.org TXT" in ok.output

    unaligned = runner.invoke(cli, ["dkim", "check"], env=env | {"DIGESTBOT_DKIM_DOMAIN": "other.example"},
                              catch_exceptions=False)
    assert unaligned.exit_code == 0 and "DMARC needs them to share a domain" in unaligned.output

    unset = runner.invoke(cli, ["dkim", "check"], env=env | {"DIGESTBOT_DKIM_KEY_FILE": ""},
                          catch_exceptions=False)
    assert unset.exit_code == 1 and "dkim keygen" in unset.output

    broken = tmp_path / "broken.pem"
    broken.write_text("-----BEGIN RSA PRIVATE KEY-----\nbm90IGEga2V5\n-----END RSA PRIVATE KEY-----\n")
    bad = runner.invoke(cli, ["dkim", "check"], env=env | {"DIGESTBOT_DKIM_KEY_FILE": str(broken)},
                        catch_exceptions=False)
    assert bad.exit_code == 1 and "not an RSA private key" in bad.output
    assert "Traceback" not in bad.output

    again = runner.invoke(cli, ["dkim", "keygen", "--selector", SELECTOR, "--out", str(key)], env=env,
                          catch_exceptions=False)
    assert again.exit_code == 1 and "exists already" in again.output


def test_unsigned_without_a_key(fresh_db: FreshDB, smtp_server: SmtpServer,
                                make_settings: Callable[..., Settings]) -> None:
    settings = make_settings(base_url=BASE_URL, from_addr=FROM_ADDR, **smtp_server.settings_env())
    assert not isinstance(mailer.make_sender(settings), OutgoingSender)
    poll_fixture(settings, fresh_db.factory)
    send_digest(settings, fresh_db.factory, "2026-W40", to="editor@example.org")
    [mail] = smtp_server.wait_for(1)
    assert b"DKIM-Signature" not in mail.data
    assert mail.mail_from == "digest@news.example.org"
