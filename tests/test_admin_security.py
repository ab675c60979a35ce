"""The admin console's locks, against the real app served by uvicorn on
127.0.0.1: every /admin route refuses anonymous requests, forms need the
session's CSRF token, a wrong password is refused and rate-limited, the
session cookie's flags and lifetime, and no console answer is ever cached.

(The console's pages and flows in a browser: test_admin_browser.py.)
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from conftest import FreshDB
from helpers import free_port, wait_until
from smtp import add_subscribers
from starlette.routing import Route
from test_digest import poll_fixture

from bot.config import Settings
from bot.digest import draft as drafts
from bot.passwords import hash_password
from bot.web import admin, create_app

PASSWORD = "correct horse battery staple"
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


class LiveServer:
    """uvicorn serving an app in a background thread."""

    def __init__(self, app: Any, port: int) -> None:
        # as `digestbot web` serves: X-Forwarded-For is the app's to judge, not uvicorn's
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off",
                                proxy_headers=False)
        self.app = app
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = f"http://127.0.0.1:{port}"

    def __enter__(self) -> LiveServer:
        self.thread.start()
        assert wait_until(lambda: self.server.started), "uvicorn did not start"
        return self

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, follow_redirects=False, timeout=30)

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="module")
def password_hash() -> str:
    return hash_password(PASSWORD)


@pytest.fixture
def serve(fresh_db: FreshDB, make_settings: Callable[..., Settings]) -> Iterator[Callable[..., LiveServer]]:
    servers: list[LiveServer] = []

    def start(**values: Any) -> LiveServer:
        port = free_port()
        values.setdefault("base_url", f"http://127.0.0.1:{port}")
        values.setdefault("language", "en")  # the console's English words are asserted below
        settings = make_settings(**values)
        server = LiveServer(create_app(settings, fresh_db.factory), port).__enter__()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.__exit__()


def log_in(client: httpx.Client, password: str = PASSWORD) -> httpx.Response:
    form = client.get("/admin/login")
    assert form.status_code == 200, form.text
    token = CSRF.search(form.text)
    assert token, "the login form has no CSRF token"
    return client.post("/admin/login", data={"csrf": token[1], "password": password, "next": "/admin"})


def csrf_of(client: httpx.Client, path: str = "/admin/draft") -> str:
    page = client.get(path)
    assert page.status_code == 200, page.text
    found = CSRF.search(page.text)
    assert found
    return found[1]


def concrete(path: str) -> str:
    return path.replace("{week}", "2026-W40").replace("{id:int}", "1")


def admin_routes() -> list[tuple[str, str]]:
    """(method, path) of every console route."""
    found = []
    for r in admin.ROUTES:
        if isinstance(r, Route) and r.path.startswith("/admin"):
            for method in sorted((r.methods or set()) - {"HEAD"}):
                found.append((method, concrete(r.path)))
    return found


# --- without a password -----------------------------------------------------------------------

def test_without_a_password_the_console_only_says_how_to_set_one(serve, fresh_db):
    add_subscribers(fresh_db.factory, ["secret-reader@example.org"])
    server = serve()
    with server.client() as client:
        page = client.get("/admin", headers={"Accept": "text/html"})
        assert page.status_code == 200
        assert "digestbot admin hash-password" in page.text and "DIGESTBOT_ADMIN_PASSWORD_HASH" in page.text
        assert page.headers["cache-control"] == "no-store"
        for method, path in admin_routes():
            answer = client.request(method, path, headers={"Accept": "text/html"})
            assert answer.status_code in (200, 403), (method, path, answer.status_code)
            assert "secret-reader" not in answer.text and 'name="csrf"' not in answer.text, path


def test_an_unreadable_password_file_is_a_message_not_a_crash(serve, tmp_path):
    server = serve(admin_password_file=str(tmp_path / "missing-hash"))
    with server.client() as client:
        page = client.get("/admin")
    assert page.status_code == 500 and "DIGESTBOT_ADMIN_PASSWORD_FILE" in page.text


# --- anonymous --------------------------------------------------------------------------------

def test_every_admin_route_refuses_anonymous_requests(serve, fresh_db, password_hash):
    add_subscribers(fresh_db.factory, ["secret-reader@example.org"])
    server = serve(admin_password_hash=password_hash)
    routes = [(m, p) for m, p in admin_routes() if p != "/admin/login"]
    assert len(routes) >= 18, routes
    with server.client() as client:
        for method, path in routes:
            browser = client.request(method, path, headers={"Accept": "text/html"})
            assert browser.status_code == 303, (method, path, browser.status_code)
            assert browser.headers["location"].startswith("/admin/login?next=")
            script = client.request(method, path, headers={"Accept": "application/json"})
            assert script.status_code == 401, (method, path, script.status_code)
            for answer in (browser, script):
                assert answer.headers["cache-control"] == "no-store", path
                assert "secret-reader" not in answer.text
        # nothing happened on the way
        added = client.post("/admin/subscribers/add", data={"email": "intruder@example.org"})
        assert added.status_code == 401
    with fresh_db.factory() as session:
        from bot import subscribers

        assert [s.email for s in subscribers.list_subscribers(session)] == ["secret-reader@example.org"]


def test_after_login_the_next_page_is_a_console_page_never_another_site(serve, password_hash):
    server = serve(admin_password_hash=password_hash)
    with server.client() as client:
        first = client.get("/admin/subscribers?q=x", headers={"Accept": "text/html"})
        assert first.headers["location"] == "/admin/login?next=%2Fadmin%2Fsubscribers%3Fq%3Dx"
        form = client.get(first.headers["location"])
        token = CSRF.search(form.text)[1]
        assert 'value="/admin/subscribers?q=x"' in form.text
        done = client.post("/admin/login", data={"csrf": token, "password": PASSWORD,
                                                 "next": "https://evil.example/admin"})
        assert done.status_code == 303 and done.headers["location"] == "/admin"


# --- the password -----------------------------------------------------------------------------

class LoginClock:
    """The console's sense of time for the login backoff: its waits are recorded
    and pass at once (the clock moves on by them), so no test sleeps."""

    def __init__(self, admin_state: Any) -> None:
        self.now = time.time()
        self.waits: list[float] = []
        admin_state.clock = lambda: self.now
        admin_state.sleep = self.sleep

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


def log_in_as(client: httpx.Client, address: str, password: str = PASSWORD) -> httpx.Response:
    """A login through a proxy that names the client ``address`` (X-Forwarded-For)."""
    form = client.get("/admin/login")
    token = CSRF.search(form.text)[1]
    return client.post("/admin/login", data={"csrf": token, "password": password, "next": "/admin"},
                       headers={"X-Forwarded-For": address})


def test_wrong_passwords_slow_the_next_attempts_and_never_refuse_the_right_one(serve, password_hash):
    server = serve(admin_password_hash=password_hash)
    clock = LoginClock(server.app.state.admin)
    with server.client() as client:
        wrong = log_in(client, "not the password")
        assert wrong.status_code == 401 and "not right" in wrong.text
        assert client.get("/admin", headers={"Accept": "text/html"}).status_code == 303
        codes = [log_in(client, f"guess {n}").status_code for n in range(11)]
        assert codes == [401] * 11, codes
        # the first five are free, then each waits twice as long, never over the cap
        assert clock.waits[:admin.auth.LOGIN_FREE] == [0.0] * admin.auth.LOGIN_FREE
        # each wait is counted from the last failure: the moments between two attempts come off it
        assert clock.waits[admin.auth.LOGIN_FREE:] == pytest.approx([0.5, 1.0, 2.0, 4.0, 4.0, 4.0, 4.0], abs=0.1)
        done = log_in(client)  # the right password, after the longest wait
        assert done.status_code == 303 and clock.waits[-1] == admin.auth.LOGIN_MAX_WAIT
        assert client.get("/admin").status_code == 200
    # a wait counts from the last failure: who comes back later does not wait again
    clock.now += 60
    with server.client() as client:
        assert log_in(client, "late guess").status_code == 401 and clock.waits[-1] == 0.0


def test_a_flood_from_many_addresses_never_locks_the_admin_out(serve, password_hash):
    """Issue 32, item 4: ten wrong passwords from each of six addresses (behind
    a trusted proxy) made the right password get 429 from every address."""
    server = serve(admin_password_hash=password_hash, trusted_proxies="127.0.0.1")
    clock = LoginClock(server.app.state.admin)
    flood = [f"198.51.100.{n}" for n in range(1, 7)]
    with server.client() as client:
        codes = {log_in_as(client, address, f"guess {n}").status_code
                 for address in flood for n in range(10)}
        assert codes == {401}
        assert max(clock.waits, default=0.0) <= admin.auth.LOGIN_MAX_WAIT
        for address in ("203.0.113.7", flood[0]):  # a new address, and one of the flood's
            client.cookies.clear()
            before = len(clock.waits)
            done = log_in_as(client, address)
            assert done.status_code == 303, (address, done.status_code)
            assert sum(clock.waits[before:]) <= admin.auth.LOGIN_MAX_WAIT


def test_x_forwarded_for_counts_only_from_a_trusted_proxy(serve, password_hash):
    server = serve(admin_password_hash=password_hash)  # DIGESTBOT_TRUSTED_PROXIES unset: none
    console = server.app.state.admin
    LoginClock(console)
    with server.client() as client:
        for n in range(6):
            assert log_in_as(client, f"198.51.100.{n}", "wrong").status_code == 401
    # the addresses a client claims are ignored: all six came from 127.0.0.1
    assert console.failures.recent("ip:127.0.0.1")[0] == 6
    assert console.failures.recent("ip:198.51.100.1")[0] == 0


def test_one_address_waits_its_turn_and_a_crowd_of_its_attempts_gets_429(serve, password_hash):
    """Many attempts at once from one address cannot share one wait: they are
    checked one at a time, and more than LOGIN_QUEUE waiting are refused."""
    server = serve(admin_password_hash=password_hash)
    console = server.app.state.admin

    async def crowd() -> tuple[list[bool], bool]:
        release = asyncio.Event()

        async def held(seconds: float) -> None:
            await release.wait()

        console.sleep = held
        tasks = [asyncio.create_task(console.try_login("192.0.2.10", "wrong"))
                 for _ in range(admin.auth.LOGIN_QUEUE)]
        while console._turns.get("192.0.2.10", (None, 0))[1] < admin.auth.LOGIN_QUEUE:
            await asyncio.sleep(0)
        try:
            await console.try_login("192.0.2.10", PASSWORD)
            refused = False
        except admin.auth.TooManyWaiting:
            refused = True
        other = asyncio.create_task(console.try_login("192.0.2.11", PASSWORD))  # not its queue
        release.set()
        return [*await asyncio.gather(*tasks), await other], refused

    results, refused = asyncio.run(crowd())
    assert refused and results == [False] * admin.auth.LOGIN_QUEUE + [True]
    assert "192.0.2.10" not in console._turns


def test_the_right_password_opens_the_console_and_logout_closes_it(serve, password_hash):
    server = serve(admin_password_hash=password_hash)
    with server.client() as client:
        done = log_in(client)
        assert done.status_code == 303 and done.headers["location"] == "/admin"
        assert client.get("/admin").status_code == 200
        out = client.post("/admin/logout", data={"csrf": csrf_of(client, "/admin")})
        assert out.status_code == 303
        assert client.get("/admin", headers={"Accept": "text/html"}).status_code == 303


@pytest.mark.parametrize("scheme", ["https", "http"])
def test_the_session_cookie_flags(serve, password_hash, scheme):
    port_url = "https://digest.example.org" if scheme == "https" else None
    server = serve(admin_password_hash=password_hash, admin_session_hours=3,
                   **({"base_url": port_url} if port_url else {}))
    with server.client() as client:
        form = client.get("/admin/login")
        token = CSRF.search(form.text)[1]
        anonymous = form.headers["set-cookie"].split(";")[0]
        # sent by hand: a client keeps a Secure cookie for https, and this server is http
        client.cookies.clear()
        done = client.post("/admin/login", data={"csrf": token, "password": PASSWORD},
                           headers={"Cookie": anonymous})
    assert done.status_code == 303, done.text
    cookie = done.headers["set-cookie"]
    parts = [p.strip().lower() for p in cookie.split(";")]
    assert parts[0].startswith("digestbot_admin=")
    assert "httponly" in parts and "samesite=lax" in parts and "path=/admin" in parts
    assert "max-age=10800" in parts  # DIGESTBOT_ADMIN_SESSION_HOURS=3
    assert ("secure" in parts) == (scheme == "https")


def test_a_session_expires_and_a_new_password_ends_it(serve, password_hash, tmp_path):
    hash_file = tmp_path / "admin-hash"
    hash_file.write_text(password_hash + "\n", encoding="utf-8")
    server = serve(admin_password_file=str(hash_file), admin_session_hours=1)
    console = server.app.state.admin
    with server.client() as client:
        assert log_in(client).status_code == 303
        assert client.get("/admin").status_code == 200
        console.clock = lambda: time.time() + 3601  # an hour later
        assert client.get("/admin", headers={"Accept": "text/html"}).status_code == 303
        console.clock = time.time
        assert client.get("/admin").status_code == 200
        hash_file.write_text(hash_password("another long password"), encoding="utf-8")
        assert client.get("/admin", headers={"Accept": "text/html"}).status_code == 303


def test_a_tampered_cookie_is_anonymous(serve, password_hash):
    server = serve(admin_password_hash=password_hash)
    with server.client() as client:
        log_in(client)
        value = client.cookies["digestbot_admin"]
        client.cookies.clear()
        client.cookies.set("digestbot_admin", value[:-3] + ("abc" if value[-3:] != "abc" else "xyz"),
                           path="/admin")
        assert client.get("/admin", headers={"Accept": "text/html"}).status_code == 303


# --- CSRF -------------------------------------------------------------------------------------

def test_a_missing_or_forged_csrf_token_is_refused(serve, fresh_db, password_hash):
    settings_values = {"admin_password_hash": password_hash}
    server = serve(**settings_values)
    poll_fixture(server.app.state.site.settings, fresh_db.factory)
    with fresh_db.factory() as session:
        entry = drafts.load_draft(session, server.app.state.site.settings).data.entries[0]
    with server.client() as client:
        assert log_in(client).status_code == 303
        token = csrf_of(client)
        for data in ({}, {"csrf": ""}, {"csrf": token[:-2] + "xx"}, {"csrf": "x" * len(token)}):
            refused = client.post("/admin/draft/exclude", data={"entry": str(entry.entry_id)} | data)
            assert refused.status_code == 403 and "security token" in refused.text, data
            assert refused.headers["cache-control"] == "no-store"
        with fresh_db.factory() as session:
            assert entry.entry_id in drafts.load_draft(session, server.app.state.site.settings).data.entry_ids
        done = client.post("/admin/draft/exclude", data={"entry": str(entry.entry_id), "csrf": token})
        assert done.status_code == 303
    with fresh_db.factory() as session:
        assert entry.entry_id not in drafts.load_draft(session, server.app.state.site.settings).data.entry_ids


def test_the_login_form_needs_its_token_too(serve, password_hash):
    server = serve(admin_password_hash=password_hash)
    with server.client() as client:
        refused = client.post("/admin/login", data={"password": PASSWORD})
        assert refused.status_code == 403
        other = httpx.Client(base_url=server.url)
        token = CSRF.search(other.get("/admin/login").text)[1]  # someone else's token
        other.close()
        assert client.post("/admin/login", data={"csrf": token, "password": PASSWORD}).status_code == 403


# --- caching and the page's policy ------------------------------------------------------------

def test_every_console_answer_is_no_store_and_under_a_strict_policy(serve, fresh_db, password_hash):
    server = serve(admin_password_hash=password_hash)
    poll_fixture(server.app.state.site.settings, fresh_db.factory)
    drafts.set_note(fresh_db.factory, server.app.state.site.settings, "note", week="2026-W40")
    add_subscribers(fresh_db.factory, ["reader@example.org"])
    with server.client() as client:
        log_in(client)
        pages = ["/admin", "/admin/draft", "/admin/draft?week=2026-W40", "/admin/subscribers",
                 "/admin/subscribers/1", "/admin/archive", "/admin/subscribers.csv",
                 "/admin/draft/preview?week=2026-W40", "/admin/login"]
        for path in pages:
            answer = client.get(path)
            assert answer.status_code in (200, 303), (path, answer.status_code)
            assert answer.headers["cache-control"] == "no-store", path
            assert answer.headers["referrer-policy"] == "no-referrer", path
            policy = answer.headers["content-security-policy"]
            assert "script-src" not in policy or "script-src 'self'" in policy, path
            if answer.headers.get("content-type", "").startswith("text/html") and "preview" not in path:
                assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
                # nothing inline that the policy would block
                assert not re.search(r"<script(?![^>]*\bsrc=)", answer.text), path
                assert " style=" not in answer.text and "<style" not in answer.text, path
                assert answer.headers["x-frame-options"] == "DENY"
        preview = client.get("/admin/draft/preview?week=2026-W40")
        assert preview.headers["x-frame-options"] == "SAMEORIGIN" and "<script" not in preview.text
        script = client.get("/static/admin/admin.js")
        assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
        assert client.get("/static/admin/../app.py").status_code == 404


def test_the_console_is_apart_from_the_public_pages(serve, password_hash):
    server = serve(admin_password_hash=password_hash)
    with server.client() as client:
        public = client.get("/")
        assert public.status_code == 200 and "admin" not in public.text.lower()
        assert "digestbot_admin" not in public.headers.get("set-cookie", "")
        assert client.get("/admin/nope", headers={"Accept": "text/html"}).status_code == 404


def test_settings_check_the_admin_values(make_settings):
    from bot.errors import ConfigError

    with pytest.raises(ConfigError, match="not an argon2 hash"):
        make_settings(admin_password_hash="hunter2")
    with pytest.raises(ConfigError, match="from 1 to 720"):
        make_settings(admin_session_hours=0)
    assert dataclasses.replace(make_settings(), require_approval=True).require_approval
