"""The web app over a real socket: uvicorn in a thread on 127.0.0.1, httpx as the client,
confirmation mails and digests through a real SMTP server (aiosmtpd)."""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from conftest import FreshDB
from helpers import any_db, free_port, wait_until
from smtp import SmtpServer, add_subscribers, make_digest
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker
from test_templating import CJK, leftover_cjk

from bot import send, subscribers
from bot.config import Settings
from bot.models import Subscriber
from bot.tokens import Tokens
from bot.web import RateLimits, create_app

CONFIRM_LINK = re.compile(r"(http://127\.0\.0\.1:\d+/confirm/[A-Za-z0-9_.-]+)")
UNSUB_LINK = re.compile(r"<(http://127\.0\.0\.1:\d+/unsubscribe/[A-Za-z0-9_.-]+)>")


class LiveServer:
    """uvicorn serving an app in a background thread."""

    def __init__(self, app: Any, port: int) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = f"http://127.0.0.1:{port}"

    def __enter__(self) -> httpx.Client:
        self.thread.start()
        assert wait_until(lambda: self.server.started), "uvicorn did not start"
        self.client = httpx.Client(base_url=self.url, follow_redirects=False, timeout=10)
        return self.client

    def __exit__(self, *exc: object) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def settings(smtp_settings: Settings, port: int) -> Settings:
    """The shared SMTP settings, with links that lead to the live server."""
    return dataclasses.replace(smtp_settings, base_url=f"http://127.0.0.1:{port}")


@pytest.fixture
def web(settings: Settings, fresh_db: FreshDB, port: int) -> Iterator[httpx.Client]:
    with LiveServer(create_app(settings, fresh_db.factory), port) as client:
        yield client


def status_of(fresh_db: FreshDB, address: str) -> str | None:
    with fresh_db.factory() as session:
        sub = subscribers.subscriber_by_key(session, address)
        return sub.status if sub else None


def no_traceback(response: httpx.Response) -> None:
    assert "Traceback" not in response.text and 'File "' not in response.text
    assert response.headers["content-type"].startswith("text/html")


@any_db
def test_subscribe_confirm_send_unsubscribe(
    web: httpx.Client, settings: Settings, fresh_db: FreshDB, smtp_server: SmtpServer
) -> None:
    home = web.get("/")
    assert home.status_code == 200 and 'action="/subscribe"' in home.text
    assert "订阅每周精读" in home.text  # Chinese by default

    answer = web.post("/subscribe", data={"email": "Reader@Example.com"})
    assert answer.status_code == 200 and "请查收邮件" in answer.text
    [mail] = smtp_server.wait_for(1)
    assert mail.rcpt_tos == ("Reader@example.com",)
    body = mail.message.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    [link] = CONFIRM_LINK.findall(body)
    assert status_of(fresh_db, "reader@example.com") == "pending"

    page = web.get(link)  # what a link-scanning mail filter does
    assert page.status_code == 200 and 'method="post"' in page.text
    assert "Reader@example.com" in page.text
    assert status_of(fresh_db, "reader@example.com") == "pending"

    confirmed = web.post(link)
    assert confirmed.status_code == 200 and "订阅成功" in confirmed.text
    assert status_of(fresh_db, "reader@example.com") == "confirmed"
    reused = web.post(link)
    assert reused.status_code == 400 and "链接已失效" in reused.text
    assert web.get(link).status_code == 400

    make_digest(fresh_db.factory, "2026-W40")
    assert send.send_digest(settings, fresh_db.factory, "2026-W40").sent == 1
    digest = smtp_server.wait_for(2)[1].message
    assert digest["To"] == "Reader@example.com"
    [unsubscribe] = UNSUB_LINK.findall(digest["List-Unsubscribe"])

    page = web.get(unsubscribe)  # the footer link: a button, nothing happens yet
    assert page.status_code == 200 and 'method="post"' in page.text
    assert status_of(fresh_db, "reader@example.com") == "confirmed"

    one_click = web.post(unsubscribe, content=b"List-Unsubscribe=One-Click",
                         headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert one_click.status_code == 200 and "已退订" in one_click.text
    assert "set-cookie" not in one_click.headers
    assert status_of(fresh_db, "reader@example.com") == "unsubscribed"

    add_subscribers(fresh_db.factory, ["other@example.com"])
    make_digest(fresh_db.factory, "2026-W41")
    report = send.send_digest(settings, fresh_db.factory, "2026-W41")
    assert report.sent == 1
    assert smtp_server.copies_by_recipient() == {"reader@example.com": 2,  # confirm + W40
                                                 "other@example.com": 1}


def test_one_click_accepts_any_body_and_is_idempotent(
    web: httpx.Client, settings: Settings, fresh_db: FreshDB
) -> None:
    [sid] = add_subscribers(fresh_db.factory, ["a@example.com"])
    path = "/unsubscribe/" + Tokens.from_settings(settings).unsubscribe_token(sid, "a@example.com")
    multipart = web.post(path, files={"List-Unsubscribe": (None, "One-Click")})
    assert multipart.status_code == 200
    assert status_of(fresh_db, "a@example.com") == "unsubscribed"
    assert web.post(path).status_code == 200  # empty body, already unsubscribed
    assert web.post(path, data={"List-Unsubscribe": "One-Click"}).status_code == 200
    with fresh_db.factory() as session:
        sub = session.get(Subscriber, sid)
        assert sub is not None and sub.status == "unsubscribed"


def test_neutral_answer_for_new_pending_and_confirmed(
    web: httpx.Client, fresh_db: FreshDB, smtp_server: SmtpServer
) -> None:
    add_subscribers(fresh_db.factory, ["known@example.com"])
    answers = [web.post("/subscribe", data={"email": a})
               for a in ("new@example.com", "new@example.com", "known@example.com")]
    assert {r.status_code for r in answers} == {200}
    assert answers[0].text == answers[1].text == answers[2].text
    # the two confirmation mails (background tasks); none for the confirmed address
    assert sorted(m.rcpt_tos[0] for m in smtp_server.wait_for(2)) == [
        "new@example.com", "new@example.com"]  # nothing to the confirmed address


@pytest.mark.parametrize("address", ["not-an-address", "", "a@b", "x" * 300 + "@example.com",
                                     "a@example.com\r\nBcc: evil@example.net"])
def test_malformed_address(web: httpx.Client, fresh_db: FreshDB, address: str) -> None:
    answer = web.post("/subscribe", data={"email": address})
    assert answer.status_code == 400 and "邮箱地址看起来不对" in answer.text
    no_traceback(answer)
    with fresh_db.factory() as session:
        assert subscribers.subscriber_counts(session) == {}


def test_missing_field_and_bad_multipart(web: httpx.Client) -> None:
    assert web.post("/subscribe", data={"other": "x"}).status_code == 400
    broken = web.post("/subscribe", content=b"--x\r\ngarbage",
                      headers={"Content-Type": "multipart/form-data; boundary=x"})
    assert broken.status_code == 400
    no_traceback(broken)


def test_tampered_tokens(web: httpx.Client, settings: Settings, fresh_db: FreshDB) -> None:
    [sid] = add_subscribers(fresh_db.factory, ["a@example.com"], status="pending")
    tokens = Tokens.from_settings(settings)
    good = tokens.unsubscribe_token(sid, "a@example.com")
    for path in (f"/unsubscribe/{good[:-3]}xyz", f"/confirm/{good}",  # wrong purpose
                 "/confirm/nonsense", "/unsubscribe/" + "A" * 600):
        for method in ("GET", "POST"):
            answer = web.request(method, path)
            assert answer.status_code == 400, (method, path)
            assert "链接无效" in answer.text
            no_traceback(answer)
    assert status_of(fresh_db, "a@example.com") == "pending"


def test_expired_tokens(settings: Settings, fresh_db: FreshDB, port: int) -> None:
    now = [1_800_000_000.0]
    tokens = Tokens("test-secret-key-not-for-production", confirm_ttl_seconds=3600,
                    unsubscribe_ttl_seconds=86400, clock=lambda: now[0])
    [sid] = add_subscribers(fresh_db.factory, ["a@example.com"], status="pending")
    confirm = "/confirm/" + tokens.confirm_token(sid, "nonce-a@example.com")
    unsub = "/unsubscribe/" + tokens.unsubscribe_token(sid, "a@example.com")
    with LiveServer(create_app(settings, fresh_db.factory, tokens=tokens), port) as client:
        assert client.get(confirm).status_code == 200
        now[0] += 3601
        for answer in (client.get(confirm), client.post(confirm)):
            assert answer.status_code == 410 and "链接已过期" in answer.text
        assert client.get(unsub).status_code == 200
        now[0] += 86400
        assert client.post(unsub).status_code == 410
    assert status_of(fresh_db, "a@example.com") == "pending"


def test_oversized_bodies(web: httpx.Client, fresh_db: FreshDB) -> None:
    declared = web.post("/subscribe", data={"email": "a@example.com", "pad": "x" * 11000})
    assert declared.status_code == 413 and "请求太大" in declared.text

    def chunks() -> Iterator[bytes]:
        yield b"email=a%40example.com&pad="
        for _ in range(12):
            yield b"x" * 1024

    streamed = web.post("/subscribe", content=chunks(),
                        headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert streamed.status_code == 413
    no_traceback(streamed)
    with fresh_db.factory() as session:
        assert subscribers.subscriber_counts(session) == {}


def test_rate_limit_per_ip(settings: Settings, fresh_db: FreshDB, port: int) -> None:
    app = create_app(settings, fresh_db.factory, limits=RateLimits(per_ip=(5, 600)))
    with LiveServer(app, port) as client:
        codes = [client.post("/subscribe", data={"email": f"r{n}@example.com"}).status_code
                 for n in range(7)]
        assert codes == [200] * 5 + [429] * 2
        limited = client.post("/subscribe", data={"email": "z@example.com"})
        assert "请稍后再试" in limited.text
    with fresh_db.factory() as session:
        assert subscribers.subscriber_counts(session) == {"pending": 5}


def test_rate_limit_per_address(settings: Settings, fresh_db: FreshDB, port: int,
                                smtp_server: SmtpServer) -> None:
    app = create_app(settings, fresh_db.factory,
                     limits=RateLimits(per_ip=(100, 600), per_address=(3, 3600)))
    with LiveServer(app, port) as client:
        codes = [client.post("/subscribe", data={"email": e}).status_code
                 for e in ("a@example.com", "A@example.com", "a@EXAMPLE.com", "a@example.com")]
        assert codes == [200, 200, 200, 429]
        assert client.post("/subscribe", data={"email": "b@example.com"}).status_code == 200
    mails = smtp_server.wait_for(4)  # a@ three times, b@ once
    assert sum(m.rcpt_tos[0].lower() == "a@example.com" for m in mails) == 3


@any_db
def test_archive(web: httpx.Client, fresh_db: FreshDB) -> None:
    assert "还没有发出过周报" in web.get("/archive").text
    make_digest(fresh_db.factory, "2026-W40", status="sent")
    make_digest(fresh_db.factory, "2026-W41", subject="still sending")
    listing = web.get("/archive")
    assert listing.status_code == 200
    assert 'href="/archive/2026-W40"' in listing.text and "still sending" not in listing.text
    page = web.get("/archive/2026-W40")
    assert page.status_code == 200 and "强化学习周报 2026-W40" in page.text
    assert "__DIGESTBOT_UNSUBSCRIBE_URL__" not in page.text and 'href="/"' in page.text
    assert web.get("/archive/2026-w40").status_code == 200
    for unknown in ("/archive/2026-W41", "/archive/2026-W39", "/archive/nonsense", "/nowhere"):
        answer = web.get(unknown)
        assert answer.status_code == 404 and "没有找到" in answer.text
        no_traceback(answer)


def test_wrong_method(web: httpx.Client) -> None:
    answer = web.get("/subscribe")
    assert answer.status_code == 405
    no_traceback(answer)


def test_healthz(web: httpx.Client) -> None:
    answer = web.get("/healthz")
    assert answer.status_code == 200
    assert answer.json() == {"status": "ok", "database": True}


def test_healthz_database_down(settings: Settings, port: int) -> None:
    broken = sessionmaker(create_engine("sqlite:////nonexistent-folder/x/db.sqlite3"))
    with LiveServer(create_app(settings, broken), port) as client:
        answer = client.get("/healthz")
        assert answer.status_code == 503
        assert answer.json() == {"status": "error", "database": False}
        archive = client.get("/archive")  # a real failure: a clean 500 page
        assert archive.status_code == 500 and "出了点问题" in archive.text
        no_traceback(archive)


def test_healthz_extra_checks(settings: Settings, fresh_db: FreshDB, port: int) -> None:
    state = {"ok": True}
    app = create_app(settings, fresh_db.factory,
                     health_checks={"scheduler": lambda: (state["ok"], "running" if state["ok"]
                                                          else "stopping")})
    with LiveServer(app, port) as client:
        assert client.get("/healthz").json() == {"status": "ok", "database": True,
                                                 "scheduler": "running"}
        state["ok"] = False
        answer = client.get("/healthz")
        assert answer.status_code == 503 and answer.json()["scheduler"] == "stopping"


def test_english_pages(make_settings: Callable[..., Settings], fresh_db: FreshDB,
                       port: int) -> None:
    settings = make_settings(language="en", base_url=f"http://127.0.0.1:{port}/digest")
    with LiveServer(create_app(settings, fresh_db.factory), port) as client:
        page = client.get("/")
        assert "Subscribe to the weekly digest" in page.text
        assert 'action="/digest/subscribe"' in page.text  # links follow the public URL's path


def test_english_edition_pages_and_confirmation_mail_have_no_chinese(
    make_settings: Callable[..., Settings], fresh_db: FreshDB, port: int, smtp_server: SmtpServer
) -> None:
    """Every page a subscriber can meet, and the confirmation mail, with
    DIGESTBOT_LANGUAGE=en and no title set: English only."""
    settings = make_settings(language="en", base_url=f"http://127.0.0.1:{port}",
                             **smtp_server.settings_env())
    now = [1_800_000_000.0]
    tokens = Tokens("test-secret-key-not-for-production", confirm_ttl_seconds=3600,
                    unsubscribe_ttl_seconds=86400, clock=lambda: now[0])
    app = create_app(settings, fresh_db.factory, tokens=tokens,
                     limits=RateLimits(per_ip=(100, 600), per_address=(1, 3600)))
    pages: dict[str, httpx.Response] = {}
    with LiveServer(app, port) as client:
        pages["home"] = client.get("/")
        pages["bad address"] = client.post("/subscribe", data={"email": "nope"})
        pages["check inbox"] = client.post("/subscribe", data={"email": "reader@example.com"})
        pages["rate limited"] = client.post("/subscribe", data={"email": "reader@example.com"})
        [mail] = smtp_server.wait_for(1)
        body = mail.message.get_body(("plain",)).get_content()  # type: ignore[union-attr]
        html = mail.message.get_body(("html",)).get_content()  # type: ignore[union-attr]
        assert mail.message["Subject"] == "Please confirm your subscription to “Weekly digest”"
        for part in (mail.message["Subject"], body, html):
            assert not CJK.search(part), part
        [link] = CONFIRM_LINK.findall(body)
        pages["confirm"] = client.get(link)
        pages["confirmed"] = client.post(link)
        pages["link used"] = client.post(link)
        sid = _subscriber(fresh_db, "reader@example.com").id
        unsubscribe = "/unsubscribe/" + tokens.unsubscribe_token(sid, "reader@example.com")
        pages["unsubscribe"] = client.get(unsubscribe)
        pages["unsubscribed"] = client.post(unsubscribe)
        pages["invalid link"] = client.get(unsubscribe[:-3] + "xyz")
        pages["archive"] = client.get("/archive")
        pages["not found"] = client.get("/nowhere")
        pages["wrong method"] = client.get("/subscribe")
        pages["too large"] = client.post("/subscribe", data={"email": "a@example.com", "pad": "x" * 11000})
        now[0] += 3601
        pages["expired"] = client.get(link)
    with LiveServer(create_app(settings, sessionmaker(create_engine(
            "sqlite:////nonexistent-folder/x/db.sqlite3"))), port) as client:
        pages["server error"] = client.get("/archive")
    codes = {name: answer.status_code for name, answer in pages.items()}
    assert codes == {"home": 200, "bad address": 400, "check inbox": 200, "rate limited": 429,
                     "confirm": 200, "confirmed": 200, "link used": 400, "unsubscribe": 200,
                     "unsubscribed": 200, "invalid link": 400, "archive": 200, "not found": 404,
                     "wrong method": 405, "too large": 413, "expired": 410, "server error": 500}
    for name, answer in pages.items():
        assert 'lang="en"' in answer.text, name
        assert not CJK.search(answer.text), (name, leftover_cjk(answer.text, []))
    assert "That doesn&#39;t look like an email address" in pages["bad address"].text
    assert "You won&#39;t receive “Weekly digest” any more." in pages["unsubscribed"].text
    assert "Confirmation links work for 72 hours" in pages["expired"].text


def _subscriber(fresh_db: FreshDB, address: str) -> Subscriber:
    with fresh_db.factory() as session:
        sub = subscribers.subscriber_by_key(session, address)
        assert sub is not None
        return sub
