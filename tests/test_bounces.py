"""The bounce mailbox, end to end: a real send through the real SMTP server
(VERP envelope senders), then real-world-shaped bounces, a complaint, an
unsubscribe mail and junk (tests/fixtures/bounces/) in a Maildir, in a real
Dovecot over IMAP and POP3: every subscriber ends in the right state, every
outcome is in the ledger, nothing is processed twice, nothing not understood
is deleted."""

from __future__ import annotations

import email
import email.policy
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dovecot
import pytest
from click.testing import CliRunner
from conftest import BASE_URL, FEED_FIXTURE, FROM_ADDR, FreshDB
from helpers import any_db
from smtp import SmtpServer, add_subscribers, make_digest
from sqlalchemy import func, select

from bot import mailer, subscribers, subscriptions
from bot.bounces import process_bounces
from bot.bounces.classify import Finding
from bot.bounces.mailboxes import DONE_KEYWORD, IGNORED_KEYWORD, MailboxError, MaildirMailbox
from bot.cli import cli
from bot.config import Settings
from bot.errors import ConfigError
from bot.models import Delivery, MailboxMessage, Subscriber
from bot.send import send_digest
from bot.tokens import Tokens

SAMPLES = Path(__file__).parent / "fixtures" / "bounces"
BOUNCE = "bounces@news.example.org"
WEEK = "2026-W40"

# sample -> (whom it is about, their state afterwards, their delivery's (status, feedback))
CASES: dict[str, tuple[str | None, str | None, tuple[str, str | None] | None]] = {
    "postfix-user-unknown.eml": ("postfix.user@example.com", "bounced", ("failed", "bounced")),
    "exim-classic.eml": ("exim.user@example.net", "bounced", ("failed", "bounced")),
    "gmail-nosuchuser.eml": ("gmail.user@example.com", "bounced", ("failed", "bounced")),
    "outlook-recipient-not-found.eml": ("outlook.user@example.org", "bounced", ("failed", "bounced")),
    "qmail-no-mailbox.eml": ("qmail.user@example.net", "bounced", ("failed", "bounced")),
    "postfix-delayed.eml": ("slow.user@example.com", "confirmed", ("sent", "delayed")),
    "arf-yahoo-complaint.eml": ("complainer@example.com", "complained", ("sent", "complained")),
    "unsubscribe-mailto.eml": ("leaver@example.com", "unsubscribed", ("sent", None)),
    "junk-out-of-office.eml": ("holiday@example.com", "confirmed", ("sent", None)),
    "junk-human-reply.eml": ("fan@example.com", "confirmed", ("sent", None)),
    "junk-spam.eml": (None, None, None),
    # about the confirmation mail of someone who never confirmed: no delivery row
    "postfix-confirmation-bounce.eml": ("pending.user@example.com", "pending", None),
}
QUIET = "quiet.reader@example.com"  # no mail comes back for them
JUNK = {"junk-out-of-office.eml", "junk-human-reply.eml", "junk-spam.eml"}
KINDS = {"bounce": 6, "delayed": 1, "complaint": 1, "unsubscribe": 1, "ignored": 3}


@dataclass(frozen=True)
class Original:
    """What a bounce quotes of the message it is about."""

    envelope_from: str
    message_id: str
    subject: str  # as sent: RFC 2047-encoded
    from_: str
    date: str
    unsubscribe_subject: str  # the subject its List-Unsubscribe mailto: asks for ('' if none)


def _unfold(value: str | None) -> str:
    return " ".join(str(value or "").split())


def mailto_of(list_unsubscribe: str | None) -> tuple[str, str] | None:
    """(address, subject) of the mailto: in a List-Unsubscribe value, as a mail client reads it."""
    from urllib.parse import parse_qs, unquote, urlsplit

    for link in re.findall(r"<([^<>]+)>", _unfold(list_unsubscribe)):
        if link.lower().startswith("mailto:"):
            parts = urlsplit(link)
            return unquote(parts.path), parse_qs(parts.query).get("subject", [""])[0]
    return None


@pytest.fixture
def deliverability(make_settings: Callable[..., Settings]) -> Callable[..., Settings]:
    """Settings with VERP on, bounces to BOUNCE and one permanent bounce enough."""
    def build(**values: object) -> Settings:
        return make_settings(**{"base_url": BASE_URL, "from_addr": FROM_ADDR, "bounce_address": BOUNCE,
                                "verp": "true", "max_hard_failures": 1, **values})
    return build


@pytest.fixture
def sent(fresh_db: FreshDB, smtp_server: SmtpServer,
         deliverability: Callable[..., Settings]) -> dict[str, Original]:
    """A week's digest sent to every confirmed subscriber and a confirmation
    mail to the pending one, through the real SMTP server: address -> Original."""
    settings = deliverability(**smtp_server.settings_env())
    confirmed = sorted({who for who, state, _ in CASES.values() if who and state != "pending"} | {QUIET})
    add_subscribers(fresh_db.factory, confirmed)
    [pending_id] = add_subscribers(fresh_db.factory, ["pending.user@example.com"], status="pending")
    make_digest(fresh_db.factory, WEEK)
    report = send_digest(settings, fresh_db.factory, WEEK, retry_base_delay=0.01)
    assert report.sent == len(confirmed), report
    with fresh_db.factory() as session:
        pending = session.get(Subscriber, pending_id)
        assert pending is not None
        sender = mailer.make_sender(settings)
        try:
            subscriptions.send_confirmation(settings, Tokens.from_settings(settings), sender, pending)
        finally:
            sender.close()
    received = smtp_server.wait_for(len(confirmed) + 1)
    originals = {}
    for mail in received:
        msg = email.message_from_bytes(mail.data)
        mailto = mailto_of(msg["List-Unsubscribe"])
        originals[mail.rcpt_tos[0]] = Original(mail.mail_from, _unfold(msg["Message-ID"]),
                                               _unfold(msg["Subject"]), _unfold(msg["From"]),
                                               _unfold(msg["Date"]), mailto[1] if mailto else "")
    return originals


def test_envelope_senders_are_verp_addresses(sent: dict[str, Original]) -> None:
    for address, original in sent.items():
        token = original.message_id.strip("<>").split("@")[0]
        assert original.envelope_from == f"bounces+{token}@news.example.org", address


def samples(sent: dict[str, Original]) -> list[tuple[str, bytes]]:
    """Every sample, filled in with what was really sent to whom it is about."""
    spam_about = sent[QUIET]
    filled = []
    for name, (who, _, _) in CASES.items():
        original = sent[who] if who else spam_about
        text = (SAMPLES / name).read_text(encoding="utf-8")
        for key, value in {"{{VERP}}": original.envelope_from, "{{BOUNCE}}": BOUNCE,
                           "{{RCPT}}": who or QUIET, "{{MESSAGE_ID}}": original.message_id,
                           "{{SUBJECT}}": original.subject, "{{FROM}}": original.from_,
                           "{{DATE}}": original.date,
                           "{{UNSUBSCRIBE_SUBJECT}}": original.unsubscribe_subject}.items():
            text = text.replace(key, value)
        assert "{{" not in text, name
        filled.append((name, text.encode("utf-8")))
    return filled


def states(fresh_db: FreshDB) -> dict[str, tuple[str, str | None, int]]:
    with fresh_db.factory() as session:
        return {s.email: (s.status, s.status_reason, s.hard_failures)
                for s in subscribers.list_subscribers(session)}


def deliveries(fresh_db: FreshDB) -> dict[str, tuple[str, str | None]]:
    with fresh_db.factory() as session:
        rows = session.execute(select(Subscriber.email, Delivery.status, Delivery.feedback)
                               .join(Delivery, Delivery.subscriber_id == Subscriber.id))
        return {address: (status, feedback) for address, status, feedback in rows}


def assert_outcomes(fresh_db: FreshDB) -> None:
    """Each subscriber in the state their mail asks for, the ledger saying why."""
    now, ledger = states(fresh_db), deliveries(fresh_db)
    for name, (who, state, delivery) in CASES.items():
        if who is None:
            continue
        assert now[who][0] == state, (name, now[who])
        assert ledger.get(who) == delivery, (name, ledger.get(who))
    assert now["leaver@example.com"][1] == "mail"
    assert now["postfix.user@example.com"][1] == "bounce"
    assert now["pending.user@example.com"][2] == 1  # counted, though not confirmed
    assert now[QUIET] == ("confirmed", None, 0) and ledger[QUIET] == ("sent", None)
    with fresh_db.factory() as session:
        kinds = dict(session.execute(select(MailboxMessage.kind, func.count())
                                     .group_by(MailboxMessage.kind)).all())
        failed = session.scalar(select(Delivery.last_error).join(Subscriber)
                                .where(Subscriber.email == "outlook.user@example.org"))
    assert kinds == KINDS
    assert failed and "5.1.10" in failed  # the reporting server's own words


# --- Maildir -------------------------------------------------------------------------------

def make_maildir(root: Path, mails: list[tuple[str, bytes]]) -> Path:
    for sub in ("new", "cur", "tmp"):
        (root / sub).mkdir(parents=True)
    for n, (name, raw) in enumerate(mails):
        (root / "new" / f"17591{n:05d}.M{n}P42.mx.{name}").write_bytes(raw)
    return root


@any_db
def test_maildir(fresh_db: FreshDB, sent: dict[str, Original], tmp_path: Path,
                 deliverability: Callable[..., Settings]) -> None:
    maildir = make_maildir(tmp_path / "Maildir", samples(sent))
    settings = deliverability(bounce_mailbox=str(maildir))
    report = process_bounces(settings, fresh_db.factory)
    print(report.summary())
    assert report.counts == KINDS
    assert_outcomes(fresh_db)
    # understood mail moved away, marked read; the rest kept, flagged for a person
    assert not list((maildir / "new").iterdir())
    processed = sorted(p.name for p in (maildir / ".Processed" / "cur").iterdir())
    kept = sorted(p.name for p in (maildir / "cur").iterdir())
    assert len(processed) == 9 and all(p.endswith(":2,S") for p in processed)
    assert len(kept) == 3 and all(k.endswith(":2,F") for k in kept)
    assert {k.split(".", 3)[3].split(":")[0] for k in kept} == JUNK

    before = states(fresh_db), deliveries(fresh_db)
    again = process_bounces(settings, fresh_db.factory)
    assert again.counts == {"seen before": 3}  # the junk, read but not acted on again
    assert (states(fresh_db), deliveries(fresh_db)) == before
    assert len(list((maildir / "cur").iterdir())) == 3


def test_the_same_mail_twice_in_the_mailbox_is_processed_once(
        fresh_db: FreshDB, sent: dict[str, Original], tmp_path: Path,
        deliverability: Callable[..., Settings]) -> None:
    postfix = dict(samples(sent))["postfix-user-unknown.eml"]
    maildir = make_maildir(tmp_path / "Maildir", [("a", postfix), ("b", postfix)])
    report = process_bounces(deliverability(bounce_mailbox=str(maildir)), fresh_db.factory)
    assert [h.kind for h in report.handled] == ["bounce", "seen before"]
    assert states(fresh_db)["postfix.user@example.com"] == ("bounced", "bounce", 1)


def test_dry_run_changes_nothing(fresh_db: FreshDB, sent: dict[str, Original], tmp_path: Path,
                                 deliverability: Callable[..., Settings]) -> None:
    maildir = make_maildir(tmp_path / "Maildir", samples(sent))
    before = states(fresh_db), deliveries(fresh_db)
    report = process_bounces(deliverability(bounce_mailbox=str(maildir)), fresh_db.factory,
                             dry_run=True)
    assert report.counts == KINDS and "dry run" in report.summary()
    assert (states(fresh_db), deliveries(fresh_db)) == before
    assert len(list((maildir / "new").iterdir())) == len(CASES)


def test_bounces_count_in_a_row_across_digests(
        fresh_db: FreshDB, smtp_server: SmtpServer, tmp_path: Path,
        deliverability: Callable[..., Settings]) -> None:
    """With a limit of 2: a bounce, then a digest the relay accepts (which
    clears the SMTP failure count), then a bounce of that one: bounced. One
    bounce after a delivery that went through counts 1. A second report of
    the same delivery counts nothing more."""
    settings = deliverability(max_hard_failures=2, **smtp_server.settings_env())
    add_subscribers(fresh_db.factory, ["twice@example.com", "once@example.com"])
    template = (SAMPLES / "postfix-user-unknown.eml").read_text(encoding="utf-8")
    gmail = (SAMPLES / "gmail-nosuchuser.eml").read_text(encoding="utf-8")

    def bounce(week: str, who: str, sample: str = template) -> bytes:
        mail = next(m for m in reversed(smtp_server.messages) if m.rcpt_tos[0] == who
                    and week in email.message_from_bytes(m.data).get("Subject", ""))
        msg = email.message_from_bytes(mail.data)
        for key, value in {"{{VERP}}": mail.mail_from, "{{RCPT}}": who, "{{BOUNCE}}": BOUNCE,
                           "{{MESSAGE_ID}}": _unfold(msg["Message-ID"]), "{{SUBJECT}}": week,
                           "{{FROM}}": _unfold(msg["From"]), "{{DATE}}": _unfold(msg["Date"])}.items():
            sample = sample.replace(key, value)
        # each real bounce has a Message-ID of its own
        return sample.replace("<20260928072203.", f"<{who}.{week}.").encode()

    def process(*mails: bytes) -> list[str]:
        maildir = tmp_path / f"Maildir{len(list(tmp_path.iterdir()))}"
        make_maildir(maildir, [(str(n), m) for n, m in enumerate(mails)])
        return [h.change for h in process_bounces(
            deliverability(max_hard_failures=2, bounce_mailbox=str(maildir)), fresh_db.factory).handled]

    make_digest(fresh_db.factory, "2026-W40", subject="digest 2026-W40")
    send_digest(settings, fresh_db.factory, "2026-W40", retry_base_delay=0.01)
    assert process(bounce("2026-W40", "twice@example.com")) == ["counted 1/2"]
    assert process(bounce("2026-W40", "twice@example.com", gmail)) == ["already counted"]
    make_digest(fresh_db.factory, "2026-W41", subject="digest 2026-W41")
    send_digest(settings, fresh_db.factory, "2026-W41", retry_base_delay=0.01)
    assert states(fresh_db)["twice@example.com"] == ("confirmed", None, 0)  # the 250 cleared it
    assert process(bounce("2026-W41", "twice@example.com"),
                   bounce("2026-W41", "once@example.com")) == ["now bounced", "counted 1/2"]
    assert states(fresh_db)["twice@example.com"] == ("bounced", "bounce", 2)
    assert states(fresh_db)["once@example.com"] == ("confirmed", None, 1)


# --- a real IMAP and POP3 server -----------------------------------------------------------

@pytest.fixture
def dovecot_server(request: pytest.FixtureRequest) -> Iterator[dovecot.Dovecot]:
    problem = dovecot.unavailable()
    if problem:
        pytest.skip(problem)
    server = dovecot.Dovecot(tls=getattr(request, "param", False))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_imap_through_the_command(fresh_db: FreshDB, sent: dict[str, Original],
                                  dovecot_server: dovecot.Dovecot) -> None:
    mails = samples(sent)
    dovecot_server.deliver([raw for _, raw in mails])
    env = {"DIGESTBOT_DATABASE_URL": fresh_db.url, "DIGESTBOT_FEED_URLS": str(FEED_FIXTURE),
           "DIGESTBOT_SECRET_KEY": "test-secret-key-not-for-production", "DIGESTBOT_CONFIG": "",
           "DIGESTBOT_FROM_ADDR": FROM_ADDR, "DIGESTBOT_BOUNCE_ADDRESS": BOUNCE,
           "DIGESTBOT_VERP": "true", "DIGESTBOT_MAX_HARD_FAILURES": "1",
           "DIGESTBOT_BOUNCE_MAILBOX": dovecot_server.url("imap")}
    result = CliRunner().invoke(cli, ["bounces", "process"], env=env, catch_exceptions=False)
    print(result.output)
    assert result.exit_code == 0, result.output
    assert ("12 mail(s) read (6 bounce, 1 delayed, 1 complaint, 1 unsubscribe, 3 ignored); "
            "7 subscriber(s) changed state") in result.output
    assert_outcomes(fresh_db)

    flags = dovecot_server.flags()
    assert len(flags) == len(CASES)  # nothing deleted
    subjects = {name: email.message_from_bytes(raw) for name, raw in mails}
    for name, msg in subjects.items():
        got = flags[str(msg.get("Message-ID") or msg.get("Subject")).strip()]
        if name in JUNK:  # left unread, for a person
            assert got == {IGNORED_KEYWORD}, (name, got)
        else:
            assert got == {"\\Seen", DONE_KEYWORD}, (name, got)

    before = states(fresh_db), deliveries(fresh_db)
    again = CliRunner().invoke(cli, ["bounces", "process"], env=env, catch_exceptions=False)
    assert again.exit_code == 0 and "0 mail(s) read" in again.output, again.output
    assert (states(fresh_db), deliveries(fresh_db)) == before


def test_pop3_deletes_only_what_it_understood(fresh_db: FreshDB, sent: dict[str, Original],
                                              dovecot_server: dovecot.Dovecot,
                                              deliverability: Callable[..., Settings]) -> None:
    dovecot_server.deliver([raw for _, raw in samples(sent)])
    settings = deliverability(bounce_mailbox=dovecot_server.url("pop3"))
    assert process_bounces(settings, fresh_db.factory).counts == KINDS
    assert_outcomes(fresh_db)
    left = dovecot_server.flags()
    assert len(left) == len(JUNK)
    again = process_bounces(settings, fresh_db.factory)
    assert again.counts == {"seen before": 3}
    assert len(dovecot_server.flags()) == len(JUNK)


@pytest.mark.parametrize("dovecot_server", [True], indirect=True)
def test_imaps_checks_the_certificate(fresh_db: FreshDB, sent: dict[str, Original],
                                      dovecot_server: dovecot.Dovecot,
                                      deliverability: Callable[..., Settings],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    dovecot_server.deliver([dict(samples(sent))["unsubscribe-mailto.eml"]])
    settings = deliverability(bounce_mailbox=dovecot_server.url("imaps"))
    monkeypatch.setenv("SSL_CERT_FILE", str(Path(__file__).parent / "fixtures" / "no-such-ca.pem"))
    monkeypatch.setenv("SSL_CERT_DIR", str(Path(__file__).parent / "fixtures" / "no-such-dir"))
    with pytest.raises(MailboxError) as refused:
        process_bounces(settings, fresh_db.factory)
    assert "not trusted" in refused.value.message and "DIGESTBOT_BOUNCE_MAILBOX" in str(refused.value.hint)
    assert states(fresh_db)["leaver@example.com"][0] == "confirmed"

    monkeypatch.setenv("SSL_CERT_FILE", str(dovecot_server.cert))  # now our CA is trusted
    assert process_bounces(settings, fresh_db.factory).counts == {"unsubscribe": 1}
    assert states(fresh_db)["leaver@example.com"] == ("unsubscribed", "mail", 0)


def test_wrong_password_is_a_clear_error(fresh_db: FreshDB, dovecot_server: dovecot.Dovecot,
                                         deliverability: Callable[..., Settings]) -> None:
    settings = deliverability(bounce_mailbox=dovecot_server.url("imap", password="wrong"))
    with pytest.raises(MailboxError) as refused:
        process_bounces(settings, fresh_db.factory)
    assert "refused the login" in refused.value.message and "wrong" not in refused.value.message


# --- settings ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "problem"), [
    ("imap://u:p@mail.example.org/INBOX", "in the clear"),
    ("pop3://u:p@mail.example.org", "in the clear"),
    ("imaps://mail.example.org/INBOX", "needs a user and a host"),
    ("smtp://u:p@mail.example.org", "not a mailbox we can read"),
])
def test_mailbox_settings_are_checked(make_settings: Callable[..., Settings], value: str,
                                      problem: str) -> None:
    with pytest.raises(ConfigError) as bad:
        make_settings(bounce_mailbox=value)
    assert problem in bad.value.message and "DIGESTBOT_BOUNCE_MAILBOX" in bad.value.message


def test_a_folder_that_is_no_maildir_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(MailboxError) as bad:
        MaildirMailbox(tmp_path)
    assert "is not a Maildir" in bad.value.message


def test_an_unsubscribe_mail_is_read_for_its_token_only() -> None:
    """classify takes the token from the subject and nothing from From or
    Authentication-Results: a DMARC pass is text anyone can write."""
    from bot.bounces.classify import classify, parse

    def mail(subject: str, extra: str = "") -> Finding:
        raw = fill("unsubscribe-mailto.eml", {"{{RCPT}}": "victim@example.com", "{{BOUNCE}}": BOUNCE,
                                              "{{DATE}}": "now", "{{UNSUBSCRIBE_SUBJECT}}": subject})
        return classify(parse(raw.replace("From: A Reader", extra + "From: A Reader").encode()))

    signed = mail("unsubscribe WzEsImFiYyJd.aGVsbG8.c2lnbmF0dXJl")
    assert signed.kind == "unsubscribe" and signed.unsubscribe_token == "WzEsImFiYyJd.aGVsbG8.c2lnbmF0dXJl"
    assert signed.addresses == ()
    automatic = mail("unsubscribe WzEsImFiYyJd.aGVsbG8.c2lnbmF0dXJl", "Auto-Submitted: auto-generated\n")
    assert automatic.kind == "unsubscribe" and automatic.unsubscribe_token is not None
    assert mail("unsubscribe", "Auto-Submitted: auto-replied\n").kind == "ignored"
    bare = mail("unsubscribe", "Authentication-Results: mx.news.example.org; dmarc=pass header.from=example.com\n")
    assert bare.kind == "unsubscribe" and bare.unsubscribe_token is None and bare.addresses == ()


def test_digestbot_run_reads_the_mailbox_every_interval(fresh_db: FreshDB, tmp_path: Path,
                                                       deliverability: Callable[..., Settings]) -> None:
    from helpers import wait_until

    from bot import scheduler
    from bot.service import Service

    [leaver] = add_subscribers(fresh_db.factory, ["leaver@example.com"])
    settings = deliverability(bounce_interval=7)
    token = Tokens.from_settings(settings).unsubscribe_token(leaver, "leaver@example.com")
    raw = fill("unsubscribe-mailto.eml", {"{{RCPT}}": "leaver@example.com", "{{BOUNCE}}": BOUNCE,
                                          "{{DATE}}": "now", "{{UNSUBSCRIBE_SUBJECT}}": f"unsubscribe {token}"})
    maildir = make_maildir(tmp_path / "Maildir", [("unsubscribe", raw.encode())])
    settings = deliverability(bounce_mailbox=str(maildir), bounce_interval=7)
    service = Service(settings, fresh_db.engine, fresh_db.factory, send=lambda *a, **k: None)
    service.start()
    try:  # once at start, then every DIGESTBOT_BOUNCE_INTERVAL minutes
        assert wait_until(lambda: states(fresh_db)["leaver@example.com"][0] == "unsubscribed", 30)
        assert service.scheduler is not None
        job = service.scheduler.get_job(scheduler.BOUNCE_JOB_ID)
        assert job is not None and job.trigger.interval == timedelta(minutes=7)
    finally:
        service.stop()


# --- only what the bot minted is believed (issue 32) ------------------------------------------

VICTIMS = ("fan@example.com", "holiday@example.com", QUIET)
UNKNOWN_ID = "<177000000000.5eed0f0e5eed0f0e.digest@news.example.org>"  # our shape, never sent


def fill(name: str, values: dict[str, str]) -> str:
    """A sample with its placeholders replaced (what a forger can write, or what came back)."""
    text = (SAMPLES / name).read_text(encoding="utf-8")
    for key, value in values.items():
        text = text.replace(key, value)
    return text


def forged_mails(fresh_db: FreshDB) -> list[bytes]:
    """What an outsider can send to the bounce address: an ARF report naming
    victim1, three DSNs from the null sender naming victim2 (one to a VERP
    address whose token names nothing we sent), a DSN about a confirmation
    mail whose Message-ID someone else signed, and an unsubscribe mail
    'from' victim3 with a DMARC pass written in, another with a token signed
    by someone else's key."""
    victim1, victim2, victim3 = VICTIMS
    common = {"{{BOUNCE}}": BOUNCE, "{{MESSAGE_ID}}": UNKNOWN_ID, "{{SUBJECT}}": "Weekly digest",
              "{{FROM}}": FROM_ADDR, "{{DATE}}": "Mon, 28 Sep 2026 09:22:03 +0200"}
    arf = fill("arf-yahoo-complaint.eml", common | {"{{VERP}}": BOUNCE}).replace(
        "feedback@arf.mail.yahoo.com", "attacker@evil.example").replace("redacted@yahoo.example", victim1)
    dsns = []
    for n, to in enumerate([BOUNCE, BOUNCE, "bounces+177000000000.5eed0f0e5eed0f0e.digest@news.example.org"]):
        dsn = fill("postfix-user-unknown.eml", common | {"{{VERP}}": to, "{{RCPT}}": victim2})
        dsns.append(dsn.replace("<20260928072203.", f"<forged{n}."))
    with fresh_db.factory() as session:
        target = subscribers.subscriber_by_key(session, victim3)
        pending = subscribers.subscriber_by_key(session, "pending.user@example.com")
        assert target is not None and pending is not None
        foreign = Tokens("someone-elses-key", confirm_ttl_seconds=3600, unsubscribe_ttl_seconds=86400)
        foreign_token = foreign.unsubscribe_token(target.id, target.email_key)
        # a confirmation mail's Message-ID, shaped as ours but signed with another key
        foreign_id = f"<{foreign.mail_id(pending.id, pending.email_key)}@news.example.org>"
    confirmation = fill("postfix-confirmation-bounce.eml", common | {
        "{{VERP}}": f"bounces+{foreign_id.strip('<>').split('@')[0]}@news.example.org",
        "{{MESSAGE_ID}}": foreign_id, "{{RCPT}}": "pending.user@example.com"})
    unsubscribe = fill("unsubscribe-mailto.eml", common | {"{{RCPT}}": victim3}).replace(
        "From: A Reader", "Authentication-Results: mail.news.example.org;\n dkim=pass header.d=example.com;"
        "\n spf=pass smtp.mailfrom=example.com;\n dmarc=pass (p=reject) header.from=example.com\n"
        "From: A Reader")
    with_foreign = unsubscribe.replace("Subject: {{UNSUBSCRIBE_SUBJECT}}", f"Subject: unsubscribe {foreign_token}")
    with_foreign = with_foreign.replace("<CAF3x9Q+unsub.", "<CAF3x9Q+foreign.")
    unsubscribe = unsubscribe.replace("{{UNSUBSCRIBE_SUBJECT}}", "unsubscribe")
    return [m.encode() for m in [arf, *dsns, confirmation, unsubscribe, with_foreign]]


def test_forged_reports_change_nobody(fresh_db: FreshDB, sent: dict[str, Original],
                                      dovecot_server: dovecot.Dovecot, tmp_path: Path,
                                      deliverability: Callable[..., Settings]) -> None:
    """Items 1-3 of issue 32, through IMAP and the command: every forged mail
    is counted 'unmatched, ignored', left unread for a person, and nobody's
    state, failure count or delivery changes."""
    mails = forged_mails(fresh_db)
    dovecot_server.deliver(mails)
    before = states(fresh_db), deliveries(fresh_db)
    env = {"DIGESTBOT_DATABASE_URL": fresh_db.url, "DIGESTBOT_FEED_URLS": str(FEED_FIXTURE),
           "DIGESTBOT_SECRET_KEY": "test-secret-key-not-for-production", "DIGESTBOT_CONFIG": "",
           "DIGESTBOT_FROM_ADDR": FROM_ADDR, "DIGESTBOT_BOUNCE_ADDRESS": BOUNCE,
           "DIGESTBOT_VERP": "true", "DIGESTBOT_MAX_HARD_FAILURES": "3",
           "DIGESTBOT_BOUNCE_MAILBOX": dovecot_server.url("imap"),
           "DIGESTBOT_OUTBOX_DIR": str(tmp_path / "outbox")}
    result = CliRunner().invoke(cli, ["bounces", "process"], env=env, catch_exceptions=False)
    print(result.output)
    assert result.exit_code == 0, result.output
    assert f"{len(mails)} mail(s) read ({len(mails)} unmatched, ignored)" in result.output
    # the token-less mail 'from' victim3 mails victim3 the signed link, and nothing else
    mailed = [email.message_from_bytes(p.read_bytes()) for p in (tmp_path / "outbox").glob("*.eml")]
    assert [m["To"] for m in mailed] == [VICTIMS[2]]
    assert "changed state" not in result.output
    assert (states(fresh_db), deliveries(fresh_db)) == before
    assert all(flags == {IGNORED_KEYWORD} for flags in dovecot_server.flags().values())
    again = CliRunner().invoke(cli, ["bounces", "process"], env=env, catch_exceptions=False)
    assert again.exit_code == 0 and "0 mail(s) read" in again.output, again.output

    status = CliRunner().invoke(cli, ["status", "--format", "json"], env=env, catch_exceptions=False)
    assert status.exit_code == 0, status.output
    assert json.loads(status.output)["bounces"]["unmatched_ignored"] == len(mails)
    table = CliRunner().invoke(cli, ["status", "--format", "table"], env=env, catch_exceptions=False)
    assert f"{len(mails)} unmatched, ignored" in " ".join(table.output.split())


def tokenless_unsubscribe(who: str, n: int) -> bytes:
    """An unsubscribe mail as the mailto: of digests sent before it carried a token
    (``?subject=unsubscribe``) makes it: 'from' ``who``, which anyone can write."""
    return fill("unsubscribe-mailto.eml", {
        "{{BOUNCE}}": BOUNCE, "{{RCPT}}": who, "{{UNSUBSCRIBE_SUBJECT}}": "unsubscribe",
        "{{DATE}}": "Mon, 28 Sep 2026 09:22:03 +0200"}).replace("<CAF3x9Q+unsub.", f"<old{n}.").encode()


def test_an_old_mailto_link_works_in_two_steps(fresh_db: FreshDB, sent: dict[str, Original],
                                               dovecot_server: dovecot.Dovecot, tmp_path: Path,
                                               deliverability: Callable[..., Settings]) -> None:
    """A token-less unsubscribe mail (a mailto: link already sent) unsubscribes
    nobody; the subscriber its From: names is mailed the signed one-click link,
    once a week at most, and following that link unsubscribes them. A From:
    nobody is subscribed under gets no mail."""
    leaver = "leaver@example.com"
    settings = deliverability(bounce_mailbox=dovecot_server.url("imap"))
    outbox = tmp_path / "outbox"
    dovecot_server.deliver([tokenless_unsubscribe(leaver, 1), tokenless_unsubscribe("stranger@example.net", 2)])
    before = states(fresh_db)
    report = process_bounces(settings, fresh_db.factory, sender=mailer.OutboxSender(outbox))
    assert [h.kind for h in report.handled] == ["unmatched", "unmatched"], report.summary()
    assert states(fresh_db) == before
    mailed = [email.message_from_bytes(p.read_bytes(), policy=email.policy.default) for p in outbox.glob("*.eml")]
    assert [m["To"] for m in mailed] == [leaver]
    body = mailed[0].get_body(preferencelist=("plain",))  # type: ignore[attr-defined]
    assert body is not None
    link = re.search(r"https://\S+/unsubscribe/(\S+)", body.get_content())
    assert link is not None
    claim = Tokens.from_settings(settings).read_unsubscribe(link.group(1))
    with fresh_db.factory() as session:
        sub = subscribers.subscriber_by_key(session, leaver)
        assert sub is not None and claim.subscriber_id == sub.id
        assert subscriptions.unsubscribe(session, claim, datetime.now(UTC))
        session.commit()
    assert states(fresh_db)[leaver][0] == "unsubscribed"

    # a second such mail within the week mails nothing more (forged ones cannot flood a reader)
    with fresh_db.factory() as session:
        sub = subscribers.subscriber_by_key(session, leaver)
        assert sub is not None
        subscriptions.set_state(sub, "confirmed", datetime.now(UTC))
        session.commit()
    dovecot_server.deliver([tokenless_unsubscribe(leaver, 3)])
    process_bounces(settings, fresh_db.factory, sender=mailer.OutboxSender(outbox))
    assert len(list(outbox.glob("*.eml"))) == 1


def legitimate_mails(sent: dict[str, Original]) -> dict[str, bytes]:
    """Mail the bot's own evidence vouches for, each shaped to carry one kind of it only."""
    def about(who: str) -> dict[str, str]:
        o = sent[who]
        return {"{{BOUNCE}}": BOUNCE, "{{RCPT}}": who, "{{SUBJECT}}": o.subject, "{{FROM}}": o.from_,
                "{{DATE}}": o.date, "{{VERP}}": o.envelope_from, "{{MESSAGE_ID}}": o.message_id}
    verp_only = fill("postfix-user-unknown.eml", about("postfix.user@example.com")
                     | {"{{MESSAGE_ID}}": UNKNOWN_ID})  # a relay rewrote the returned headers
    dsn_message_id = fill("postfix-user-unknown.eml", about("exim.user@example.net")
                          | {"{{VERP}}": BOUNCE}).replace("<20260928072203.", "<plain.")
    arf = fill("arf-yahoo-complaint.eml", about("complainer@example.com") | {"{{VERP}}": BOUNCE})
    address, subject = mailto_of_digest(sent, "leaver@example.com")
    # the reader's client sends from an alias: the token alone decides
    unsubscribe = fill("unsubscribe-mailto.eml", about("leaver@example.com") | {
        "{{UNSUBSCRIBE_SUBJECT}}": subject}).replace("From: A Reader <leaver@example.com>",
                                                     "From: An Alias <alias@example.net>")
    assert address == BOUNCE
    return {"verp token": verp_only.encode(), "message-id in a dsn": dsn_message_id.encode(),
            "message-id in an arf": arf.encode(), "signed mailto": unsubscribe.encode()}


def mailto_of_digest(sent: dict[str, Original], who: str) -> tuple[str, str]:
    subject = sent[who].unsubscribe_subject
    assert subject.startswith("unsubscribe ") and len(subject) > 40, subject  # carries a token
    return BOUNCE, subject


def test_the_bots_own_evidence_is_believed(fresh_db: FreshDB, sent: dict[str, Original],
                                           dovecot_server: dovecot.Dovecot,
                                           deliverability: Callable[..., Settings]) -> None:
    """A VERP token alone, a recorded Message-ID in a DSN's returned headers,
    one in an ARF's embedded message, and the signed List-Unsubscribe mailto:
    each acts on the subscriber it names, through IMAP."""
    mails = legitimate_mails(sent)
    dovecot_server.deliver(list(mails.values()))
    report = process_bounces(deliverability(bounce_mailbox=dovecot_server.url("imap")), fresh_db.factory)
    print(report.summary())
    assert [h.change for h in report.handled] == ["now bounced", "now bounced", "now complained",
                                                 "now unsubscribed"]
    now, ledger = states(fresh_db), deliveries(fresh_db)
    assert now["postfix.user@example.com"] == ("bounced", "bounce", 1)
    assert now["exim.user@example.net"] == ("bounced", "bounce", 1)
    assert now["complainer@example.com"][0] == "complained"
    assert ledger["complainer@example.com"] == ("sent", "complained")
    assert now["leaver@example.com"] == ("unsubscribed", "mail", 0)
    assert all(flags == {"\\Seen", DONE_KEYWORD} for flags in dovecot_server.flags().values())


def test_a_tampered_or_expired_mailto_token_is_unmatched(
        fresh_db: FreshDB, sent: dict[str, Original], tmp_path: Path,
        deliverability: Callable[..., Settings]) -> None:
    _, subject = mailto_of_digest(sent, "leaver@example.com")
    token = subject.split()[1]
    tampered = token[:-3] + ("AAA" if not token.endswith("AAA") else "BBB")
    mails = []
    for n, subj in enumerate([f"unsubscribe {tampered}", f"Re: unsubscribe {token[:20]}"]):
        mails.append((str(n), fill("unsubscribe-mailto.eml", {
            "{{RCPT}}": "leaver@example.com", "{{BOUNCE}}": BOUNCE, "{{DATE}}": "now",
            "{{UNSUBSCRIBE_SUBJECT}}": subj}).replace("<CAF3x9Q+unsub.", f"<CAF3x9Q+{n}.").encode()))
    maildir = make_maildir(tmp_path / "Maildir", mails)
    report = process_bounces(deliverability(bounce_mailbox=str(maildir)), fresh_db.factory)
    assert report.counts == {"unmatched": 2}
    assert states(fresh_db)["leaver@example.com"][0] == "confirmed"
    # a year on (DIGESTBOT_UNSUBSCRIBE_TTL_DAYS), the genuine token has expired
    later = make_maildir(tmp_path / "Later", [("late", fill("unsubscribe-mailto.eml", {
        "{{RCPT}}": "leaver@example.com", "{{BOUNCE}}": BOUNCE, "{{DATE}}": "now",
        "{{UNSUBSCRIBE_SUBJECT}}": subject}).encode())])
    expired = process_bounces(deliverability(bounce_mailbox=str(later), unsubscribe_ttl_days=1),
                              fresh_db.factory, now=datetime.now(UTC) + timedelta(days=2))
    assert expired.counts == {"unmatched": 1} and "expired" in expired.handled[0].detail
    assert states(fresh_db)["leaver@example.com"][0] == "confirmed"
