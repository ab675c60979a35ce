"""The "choose your themes" page (issue 36): its answers over a real socket
(httpx against `digestbot web`), and a reader using it in a real browser
(Playwright driving the Debian Chromium): from the link in a digest they
received, and from the page after confirming a subscription. What they
ticked is what their next copy holds (mail through the real aiosmtpd).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import FEED_FIXTURE, FreshDB
from helpers import Digestbot, free_port, wait_until
from smtp import SmtpServer, add_subscribers
from sqlalchemy import select
from test_admin_browser import CHROMIUM, CHROMIUM_ARGS
from test_digest import poll_fixture
from test_theme_choices import PREFERENCES_LINK, copies, the_week, titles

from bot import subscribers
from bot.config import Settings
from bot.models import Subscriber
from bot.send import send_digest
from bot.templating import language
from bot.tokens import Tokens

WEEK = "2026-W40"
CONFIRM_LINK = re.compile(r"(http://127\.0\.0\.1:\d+/confirm/[A-Za-z0-9_.-]+)")


@pytest.fixture
def site(fresh_db: FreshDB, make_settings: Any, smtp_server: SmtpServer,
         digestbot: Digestbot) -> Iterator[dict[str, Any]]:
    """`digestbot web` on a free port, the fixture feed polled, two readers,
    mail to the real SMTP server; links in mails lead to this server."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    settings: Settings = make_settings(base_url=base, **smtp_server.settings_env())
    poll_fixture(settings, fresh_db.factory)
    add_subscribers(fresh_db.factory, ["ada@example.org", "bo@example.org"])
    env = {"DIGESTBOT_DATABASE_URL": fresh_db.url, "DIGESTBOT_FEED_URLS": str(FEED_FIXTURE),
           "DIGESTBOT_SECRET_KEY": "test-secret-key-not-for-production", "DIGESTBOT_BASE_URL": base,
           "DIGESTBOT_SMTP_HOST": smtp_server.host, "DIGESTBOT_SMTP_PORT": str(smtp_server.port),
           "DIGESTBOT_SMTP_SECURITY": "none", "DIGESTBOT_LOG_LEVEL": "WARNING"}
    proc = digestbot.start("web", "--port", str(port), env=env)

    def up() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"digestbot web exited: {proc.stderr.read() if proc.stderr else ''}")
        try:
            return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    assert wait_until(up, timeout=30), "digestbot web did not start"
    yield {"base": base, "settings": settings, "factory": fresh_db.factory,
           "tokens": Tokens.from_settings(settings)}


def token_for(site: dict[str, Any], address: str) -> str:
    with site["factory"]() as session:
        sub = subscribers.subscriber_by_key(session, address)
        assert sub is not None
        return str(site["tokens"].preferences_token(sub.id, sub.email_key))


def choice_of(site: dict[str, Any], address: str) -> str | None:
    with site["factory"]() as session:
        return session.scalar(select(Subscriber.themes).where(Subscriber.email_key == address))


def neutral(body: str, token: str) -> str:
    return body.replace(token, "TOKEN")


# --- the page's answers ---------------------------------------------------------------------

def test_the_page_reveals_nothing_about_who_is_subscribed(site: dict[str, Any]) -> None:
    base = site["base"]
    ada = token_for(site, "ada@example.org")
    with site["factory"]() as session, session.begin():  # bo is removed: his token stays valid
        bo_sub = subscribers.subscriber_by_key(session, "bo@example.org")
        assert bo_sub is not None
        bo = str(site["tokens"].preferences_token(bo_sub.id, bo_sub.email_key))
        subscribers.delete_subscriber(session, bo_sub)
    with httpx.Client(base_url=base, timeout=10) as client:
        shown = client.get(f"/preferences/{ada}")
        gone = client.get(f"/preferences/{bo}")
        assert shown.status_code == gone.status_code == 200
        assert shown.headers["cache-control"] == "no-store"
        assert neutral(shown.text, ada) == neutral(gone.text, bo)  # the same page, whoever it is
        assert 'value="coding_agents"' in shown.text and "checked" not in shown.text

        saved = client.post(f"/preferences/{ada}", data={"theme": ["coding_agents", "no_such_theme"]})
        saved_gone = client.post(f"/preferences/{bo}", data={"theme": ["coding_agents", "no_such_theme"]})
        assert saved.status_code == saved_gone.status_code == 200
        assert neutral(saved.text, ada) == neutral(saved_gone.text, bo)
        assert re.search(r'value="coding_agents" checked', saved.text)
        assert choice_of(site, "ada@example.org") == "coding_agents"  # the unknown key is not kept
        assert re.search(r'value="coding_agents" checked', client.get(f"/preferences/{ada}").text)

        # a changed, truncated or wrong-kind token: the pages every link answers with
        unsubscribe = site["tokens"].unsubscribe_token(1, "ada@example.org")
        for bad in (ada[:-3] + "abc", ada[:20], unsubscribe):
            for method in ("GET", "POST"):
                answer = client.request(method, f"/preferences/{bad}")
                assert answer.status_code == 400, (bad, method)
                assert answer.text == client.get(f"/unsubscribe/{ada[:20]}").text
        assert choice_of(site, "ada@example.org") == "coding_agents"
        sample = client.get("/preferences/SAMPLE-each-reader-gets-their-own-link")
        assert sample.status_code == 200 and "checkbox" not in sample.text


def test_an_expired_link_says_so(site: dict[str, Any], make_settings: Any) -> None:
    old = Tokens.from_settings(site["settings"], clock=lambda: 1_000_000.0)
    with site["factory"]() as session:
        sub = subscribers.subscriber_by_key(session, "ada@example.org")
        assert sub is not None
        token = old.preferences_token(sub.id, sub.email_key)
    answer = httpx.get(f"{site['base']}/preferences/{token}", timeout=10)
    assert answer.status_code == 410


# --- in a real browser --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: run scripts/install-system-deps.sh as root")
        pytest.skip("chromium is not installed (scripts/install-system-deps.sh installs it)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[test]' brings playwright")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


def tick(page: Any, wanted: set[str]) -> None:
    """Tick exactly ``wanted`` among the page's theme checkboxes, as a reader clicks."""
    for box in page.locator("input[name=theme]").all():
        if (box.get_attribute("value") in wanted) != box.is_checked():
            box.click()


def ticked(page: Any) -> set[str]:
    return {str(box.get_attribute("value")) for box in page.locator("input[name=theme]").all()
            if box.is_checked()}


def test_a_reader_chooses_from_the_link_in_their_digest(
        browser: Any, site: dict[str, Any], smtp_server: SmtpServer) -> None:
    settings, factory = site["settings"], site["factory"]
    lang = language(settings.language)
    assert send_digest(settings, factory, WEEK).sent == 2
    link = PREFERENCES_LINK.search(copies(smtp_server)["ada@example.org"][1])
    assert link is not None and link.group(0).startswith(site["base"])

    page = browser.new_page()
    page.goto(link.group(0))
    assert ticked(page) == set()  # no choice yet: every section
    names = [label.inner_text() for label in page.locator("label.theme").all()]
    data = the_week(settings, factory)
    week_names = {theme.key: theme.name for theme in data.themes}
    assert any(week_names["safety_security"] in name for name in names)  # in the reader's language
    tick(page, {"safety_security", "environments_infra"})
    page.get_by_role("button", name=lang.gettext("Save my themes")).click()
    page.get_by_role("status").wait_for()
    assert ticked(page) == {"safety_security", "environments_infra"}
    page.reload()  # the saved choice is marked when the page is opened again
    assert ticked(page) == {"safety_security", "environments_infra"}
    page.close()
    assert choice_of(site, "ada@example.org") == "environments_infra,safety_security"

    smtp_server.messages.clear()
    assert send_digest(settings, factory, WEEK, resend=True).sent == 2
    got = copies(smtp_server)
    mine = {"safety_security", "environments_infra"}
    ada_text = got["ada@example.org"][1]
    assert all(title in ada_text for title in titles(data, mine))
    assert not any(title in ada_text for title in titles(data) if title not in titles(data, mine))
    assert lang.gettext("Also this week") in ada_text
    assert all(title in got["bo@example.org"][1] for title in titles(data))  # bo chose nothing
    archive = httpx.get(f"{site['base']}/archive/{WEEK}", timeout=10).text  # the web copy: no reader's link
    assert "__DIGESTBOT_" not in archive and "/preferences/" not in archive


def test_the_page_after_confirming_offers_the_choice(
        browser: Any, site: dict[str, Any], smtp_server: SmtpServer) -> None:
    settings, factory, base = site["settings"], site["factory"], site["base"]
    lang = language(settings.language)
    page = browser.new_page()
    page.goto(base + "/")
    page.fill("#email", "cat@example.org")
    page.get_by_role("button", name=lang.gettext("Subscribe")).click()
    page.wait_for_url(f"{base}/subscribe")
    [mail] = smtp_server.wait_for(1)
    link = CONFIRM_LINK.search(mail.message.get_body(("plain",)).get_content())  # type: ignore[union-attr]
    assert link is not None
    page.goto(link.group(1))
    page.get_by_role("button", name=lang.gettext("Confirm subscription")).click()
    page.locator("input[name=theme]").first.wait_for()
    assert "cat@example.org" in page.content()  # the confirmation, with the choice under it
    tick(page, {"credit_assignment"})
    page.get_by_role("button", name=lang.gettext("Save my themes")).click()
    page.get_by_role("status").wait_for()
    page.close()
    assert choice_of(site, "cat@example.org") == "credit_assignment"

    smtp_server.messages.clear()
    assert send_digest(settings, factory, WEEK).sent == 3
    data = the_week(settings, factory)
    cat = copies(smtp_server)["cat@example.org"]
    assert all(title in cat[1] for title in titles(data, {"credit_assignment"}))
    assert not any(title in cat[1] for title in titles(data, {"coding_agents", "harness_engineering"}))
    assert data.themes[0].name in cat[0]  # the subject names the reader's section
