"""Signed link tokens: round trips, tampering, expiry (with a frozen clock), purposes."""

from __future__ import annotations

import logging
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.config import Settings, load_settings
from bot.tokens import (
    ConfirmClaim,
    TokenExpired,
    TokenInvalid,
    Tokens,
    UnsubscribeClaim,
    address_tag,
    load_secret_key,
)

HOUR = 3600


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def tokens(clock: Clock, secret: str = "s3cret") -> Tokens:
    return Tokens(secret, confirm_ttl_seconds=72 * HOUR, unsubscribe_ttl_seconds=365 * 86400,
                  clock=clock)


def test_confirm_round_trip() -> None:
    t = tokens(Clock())
    assert t.read_confirm(t.confirm_token(42, "nonce-1")) == ConfirmClaim(42, "nonce-1")


def test_unsubscribe_round_trip_binds_the_address() -> None:
    t = tokens(Clock())
    claim = t.read_unsubscribe(t.unsubscribe_token(7, "reader@example.com"))
    assert claim == UnsubscribeClaim(7, address_tag("reader@example.com"))
    assert claim.address_tag != address_tag("other@example.com")


def test_tokens_are_url_safe() -> None:
    t = tokens(Clock())
    for token in (t.confirm_token(1, "n"), t.unsubscribe_token(1, "a@b.c")):
        assert all(c.isalnum() or c in "-_." for c in token), token


@pytest.mark.parametrize("mangle", [
    lambda tok: tok[:-2] + ("AA" if not tok.endswith("AA") else "BB"),  # signature
    lambda tok: "x" + tok[1:],  # payload
    lambda tok: tok[: len(tok) // 2],  # truncated
    lambda tok: "",
    lambda tok: "a" * 600,
    lambda tok: "not-a-token",
])
def test_tampered_tokens_are_invalid(mangle: Callable[[str], str]) -> None:
    t = tokens(Clock())
    with pytest.raises(TokenInvalid):
        t.read_confirm(mangle(t.confirm_token(1, "nonce")))


def test_other_secret_is_invalid() -> None:
    clock = Clock()
    with pytest.raises(TokenInvalid):
        tokens(clock, "other").read_confirm(tokens(clock).confirm_token(1, "n"))


def test_a_signed_mail_id_names_its_subscriber_and_address_only() -> None:
    """The confirmation mail's Message-ID local part: a VERP token in lower-case
    hex (it survives a mail server that folds case), believed only with our
    secret, for that subscriber and that address."""
    from bot.mailer import verp

    t = tokens(Clock())
    local = t.mail_id(42, "reader@example.com")
    assert local != t.mail_id(42, "reader@example.com")  # a fresh nonce each mail
    assert verp.token_of(f"<{local}@news.example.org>") == local
    claim = t.read_mail_id(local.upper())
    assert claim is not None and claim.subscriber_id == 42
    assert t.mail_id_matches(claim, "reader@example.com")
    assert not t.mail_id_matches(claim, "other@example.com")
    assert not tokens(Clock(), "other").mail_id_matches(claim, "reader@example.com")
    forged = t.read_mail_id(local[:-1] + ("0" if local[-1] != "0" else "1"))
    assert forged is not None and not t.mail_id_matches(forged, "reader@example.com")
    for junk in ("", "c42", "c0.12345678.0123456789abcdef", "42.1.2", "c42.123.0123456789abcdef"):
        assert t.read_mail_id(junk) is None, junk


def test_a_token_only_works_for_its_purpose() -> None:
    t = tokens(Clock())
    with pytest.raises(TokenInvalid):
        t.read_unsubscribe(t.confirm_token(1, "n"))
    with pytest.raises(TokenInvalid):
        t.read_confirm(t.unsubscribe_token(1, "a@b.c"))


def test_confirm_token_expires_after_its_ttl() -> None:
    clock = Clock()
    t = tokens(clock)
    token = t.confirm_token(1, "n")
    clock.now += 72 * HOUR
    assert t.read_confirm(token).subscriber_id == 1  # still valid at exactly the ttl
    clock.now += 1
    with pytest.raises(TokenExpired):
        t.read_confirm(token)


def test_unsubscribe_token_outlives_the_confirm_ttl_then_expires() -> None:
    clock = Clock()
    t = tokens(clock)
    token = t.unsubscribe_token(3, "a@b.c")
    clock.now += 300 * 86400
    assert t.read_unsubscribe(token).subscriber_id == 3
    clock.now += 66 * 86400
    with pytest.raises(TokenExpired):
        t.read_unsubscribe(token)


def test_ttl_comes_from_settings(make_settings: Callable[..., Settings]) -> None:
    clock = Clock()
    t = Tokens.from_settings(make_settings(confirm_ttl_hours=1, unsubscribe_ttl_days=2), clock)
    confirm, unsub = t.confirm_token(1, "n"), t.unsubscribe_token(1, "a@b.c")
    clock.now += HOUR + 1
    with pytest.raises(TokenExpired):
        t.read_confirm(confirm)
    assert t.read_unsubscribe(unsub).subscriber_id == 1
    clock.now += 2 * 86400
    with pytest.raises(TokenExpired):
        t.read_unsubscribe(unsub)


def test_secret_key_setting_wins(make_settings: Callable[..., Settings]) -> None:
    assert load_secret_key(make_settings()) == "test-secret-key-not-for-production"


def test_secret_key_is_generated_once_and_kept_private(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = load_settings({"DIGESTBOT_DATABASE_URL": f"sqlite:///{tmp_path}/v/db.sqlite3"})
    assert settings.secret_key is None
    with caplog.at_level(logging.WARNING, logger="bot.tokens"):
        first = load_secret_key(settings)
    assert len(first) >= 40
    assert "DIGESTBOT_SECRET_KEY is not set" in caplog.text
    path = tmp_path / "v" / "secret_key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["secret_key"]
    caplog.clear()
    assert load_secret_key(settings) == first  # the same key on the next start
    assert "not set" not in caplog.text
    # and links made with it keep working across restarts
    token = Tokens.from_settings(settings).confirm_token(5, "n")
    assert Tokens.from_settings(settings).read_confirm(token).subscriber_id == 5
