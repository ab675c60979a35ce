"""Subscriber states and their changes, on a real migrated SQLite database."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import FreshDB
from helpers import any_db

from bot import subscribers, subscriptions
from bot.config import Settings
from bot.mailer import OutboxSender
from bot.models import Subscriber
from bot.subscriptions import AddressError, LinkUsed, normalize_address, read_csv
from bot.tokens import Tokens

NOW = datetime(2026, 10, 5, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(("given", "expected"), [
    ("  Reader@Example.COM ", "Reader@example.com"),
    ("a.b+tag@sub.example.org", "a.b+tag@sub.example.org"),
    ("user@bücher.example", "user@xn--bcher-kva.example"),
])
def test_normalize_address(given: str, expected: str) -> None:
    assert normalize_address(given) == expected


@pytest.mark.parametrize("bad", [
    "", "   ", "plainaddress", "a@", "@example.com", "a@@example.com", "a b@example.com",
    "a@example.com\r\nBcc: x@y", "Name <a@example.com>", "用户@example.com",
    "a" * 250 + "@example.com", "a@example",
])
def test_malformed_addresses_are_refused(bad: str) -> None:
    with pytest.raises(AddressError):
        normalize_address(bad)


def get(fresh_db: FreshDB, address: str) -> Subscriber:
    with fresh_db.factory() as session:
        sub = subscribers.subscriber_by_key(session, address.lower())
        assert sub is not None
        return sub


@any_db
def test_request_creates_pending_once_case_insensitively(fresh_db: FreshDB) -> None:
    first = subscriptions.subscribe(fresh_db.factory, "Reader@example.com", now=NOW)
    assert (first.action, first.confirm_mail, first.subscriber.status) == ("created", True,
                                                                          "pending")
    again = subscriptions.subscribe(fresh_db.factory, "READER@example.com", now=NOW)
    assert (again.action, again.confirm_mail) == ("pending", True)
    assert again.subscriber.id == first.subscriber.id
    assert again.subscriber.token_nonce == first.subscriber.token_nonce  # old link still works
    with fresh_db.factory() as session:
        assert subscribers.subscriber_counts(session) == {"pending": 1}
    sub = get(fresh_db, "reader@example.com")
    assert sub.email == "Reader@example.com" and sub.email_key == "reader@example.com"
    assert sub.created_at == NOW


@any_db
def test_confirm_once_then_the_link_is_used(fresh_db: FreshDB) -> None:
    sub = subscriptions.subscribe(fresh_db.factory, "a@example.com", now=NOW).subscriber
    claim = subscriptions.ConfirmClaim(sub.id, sub.token_nonce)
    with fresh_db.factory() as session, session.begin():
        subscriptions.confirm(session, claim, NOW)
    confirmed = get(fresh_db, "a@example.com")
    assert confirmed.status == "confirmed" and confirmed.confirmed_at == NOW
    assert confirmed.token_nonce != sub.token_nonce
    with fresh_db.factory() as session, session.begin(), pytest.raises(LinkUsed):
        subscriptions.confirm(session, claim, NOW)


def test_already_confirmed_gets_no_mail(fresh_db: FreshDB) -> None:
    subscriptions.subscribe(fresh_db.factory, "a@example.com", confirmed=True, now=NOW)
    change = subscriptions.subscribe(fresh_db.factory, "a@example.com", now=NOW)
    assert (change.action, change.confirm_mail, change.subscriber.status) == (
        "already", False, "confirmed")


@any_db
def test_unsubscribe_is_idempotent_and_rotates_the_nonce(fresh_db: FreshDB) -> None:
    sub = subscriptions.subscribe(fresh_db.factory, "a@example.com", confirmed=True,
                                  now=NOW).subscriber
    claim = subscriptions.UnsubscribeClaim(sub.id, subscriptions.address_tag(sub.email_key))
    for expected in (True, False):
        with fresh_db.factory() as session, session.begin():
            assert subscriptions.unsubscribe(session, claim, NOW) is expected
    after = get(fresh_db, "a@example.com")
    assert after.status == "unsubscribed" and after.unsubscribed_at == NOW
    assert after.token_nonce != sub.token_nonce


def test_unsubscribe_token_of_another_address_does_nothing(fresh_db: FreshDB) -> None:
    sub = subscriptions.subscribe(fresh_db.factory, "a@example.com", confirmed=True).subscriber
    claim = subscriptions.UnsubscribeClaim(sub.id, subscriptions.address_tag("b@example.com"))
    with fresh_db.factory() as session, session.begin():
        assert subscriptions.unsubscribe(session, claim, NOW) is False
    assert get(fresh_db, "a@example.com").status == "confirmed"


def test_resubscribing_after_unsubscribe_needs_confirmation(fresh_db: FreshDB) -> None:
    sub = subscriptions.subscribe(fresh_db.factory, "a@example.com", confirmed=True).subscriber
    claim = subscriptions.UnsubscribeClaim(sub.id, subscriptions.address_tag(sub.email_key))
    with fresh_db.factory() as session, session.begin():
        subscriptions.unsubscribe(session, claim, NOW)
    change = subscriptions.subscribe(fresh_db.factory, "a@example.com", now=NOW)
    assert (change.subscriber.status, change.confirm_mail) == ("pending", True)


@any_db
def test_add_confirmed_respects_an_opt_out(fresh_db: FreshDB) -> None:
    pending = subscriptions.subscribe(fresh_db.factory, "p@example.com").subscriber
    assert subscriptions.subscribe(fresh_db.factory, "p@example.com",
                                   confirmed=True).action == "confirmed"
    assert get(fresh_db, "p@example.com").token_nonce != pending.token_nonce
    sub = subscriptions.subscribe(fresh_db.factory, "u@example.com", confirmed=True).subscriber
    with fresh_db.factory() as session, session.begin():
        subscriptions.unsubscribe(
            session, subscriptions.UnsubscribeClaim(sub.id, subscriptions.address_tag(
                "u@example.com")), NOW)
    change = subscriptions.subscribe(fresh_db.factory, "u@example.com", confirmed=True)
    assert (change.action, change.subscriber.status) == ("kept", "unsubscribed")


@any_db
def test_remove_deletes_the_row(fresh_db: FreshDB) -> None:
    subscriptions.subscribe(fresh_db.factory, "a@example.com", confirmed=True)
    with fresh_db.factory() as session, session.begin():
        assert subscriptions.remove(session, "A@example.com") is True
        assert subscriptions.remove(session, "A@example.com") is False
    with fresh_db.factory() as session:
        assert subscribers.subscriber_counts(session) == {}


def test_confirmation_mail_carries_a_working_single_use_link(
    fresh_db: FreshDB, make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    settings = make_settings(base_url="https://digest.example.org/news")
    tokens = Tokens.from_settings(settings)
    sub = subscriptions.subscribe(fresh_db.factory, "a@example.com").subscriber
    outbox = OutboxSender(tmp_path / "mail")
    subscriptions.send_confirmation(settings, tokens, outbox, sub)
    [path] = list((tmp_path / "mail").glob("*.eml"))
    import email
    from email import policy

    msg = email.message_from_bytes(path.read_bytes(), policy=policy.default)
    assert msg["To"] == "a@example.com" and "请确认订阅" in msg["Subject"]
    text = msg.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    html = msg.get_body(("html",)).get_content()  # type: ignore[union-attr]
    links = re.findall(r"https://digest\.example\.org/news/confirm/(\S+)", text)
    assert len(links) == 1 and links[0] in html
    assert tokens.read_confirm(links[0]) == subscriptions.ConfirmClaim(sub.id, sub.token_nonce)
    assert "72" in text


def test_read_csv_with_header_and_bad_rows() -> None:
    text = "name,Email\nAnn,ann@example.com\nBob,not-an-address\n\nCy,CY@Example.com\nDee\n"
    rows = list(read_csv(text))
    assert [(r.line, r.address) for r in rows] == [
        (2, "ann@example.com"), (3, None), (5, "CY@example.com"), (6, None)]
    assert "not a valid email address" in (rows[1].error or "")
    assert rows[3].error == "no email column in this row"


def test_read_csv_without_header_uses_first_column() -> None:
    rows = list(read_csv("a@example.com,x\nb@example.com\n"))
    assert [r.address for r in rows] == ["a@example.com", "b@example.com"]


@any_db
def test_export_rows(fresh_db: FreshDB) -> None:
    subscriptions.subscribe(fresh_db.factory, "a@example.com", confirmed=True, now=NOW)
    with fresh_db.factory() as session:
        rows = list(subscriptions.export_rows(subscribers.iter_subscribers(session, batch=1)))
    assert rows[0][:4] == ["email", "status", "created_at", "confirmed_at"]
    assert rows[1][:4] == ["a@example.com", "confirmed", "2026-10-05T09:00:00+00:00",
                           "2026-10-05T09:00:00+00:00"]
