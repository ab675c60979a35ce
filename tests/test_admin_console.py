"""The console as an operator meets it (issue 35): it fits every screen from a
phone to a wide monitor, speaks the configured language, manages the feeds
and imports subscribers from CSV. Playwright driving the Debian Chromium
against `digestbot web` in a real process on 127.0.0.1 (the fixtures of
test_admin_browser.py); feeds come from the real HTTP server ``feed_server``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from test_admin_browser import PASSWORD, WEEK, browser, log_in, start_console  # noqa: F401
from test_templating import CJK

from bot.send import send_digest

WIDTHS = (375, 1024, 1200, 1440, 1920)
MIN_COLUMN = 300  # px: below this the editor's column reads one word a line


@pytest.fixture
def console_en(fresh_db, make_settings, smtp_server, digestbot) -> Iterator[dict[str, Any]]:
    yield start_console(fresh_db, make_settings, smtp_server, digestbot, language="en")


@pytest.fixture
def console_zh(fresh_db, make_settings, smtp_server, digestbot) -> Iterator[dict[str, Any]]:
    yield start_console(fresh_db, make_settings, smtp_server, digestbot, language="zh")


def console_pages(base: str) -> list[str]:
    """Every page of the console an operator opens (after one digest went out)."""
    return [f"{base}/admin", f"{base}/admin/draft?week={WEEK}", f"{base}/admin/subscribers",
            f"{base}/admin/subscribers/1", f"{base}/admin/feeds", f"{base}/admin/archive",
            f"{base}/admin/archive/2026-W39"]


def overflow(page: Any) -> int:
    """How far the page reaches past the window's right edge (0: it fits)."""
    return int(page.evaluate("document.documentElement.scrollWidth - window.innerWidth"))


def box(page: Any, selector: str) -> dict[str, float]:
    found = page.locator(selector).first.bounding_box()
    assert found is not None, f"{selector} is not shown"
    return dict(found)


@pytest.mark.parametrize("width", WIDTHS)
def test_every_console_page_fits_the_window(browser, console_en, width):  # noqa: F811
    base = console_en["base"]
    assert send_digest(console_en["settings"], console_en["factory"], "2026-W39").outcome == "sent"
    context = browser.new_context(viewport={"width": width, "height": 900},
                                  is_mobile=width < 600, has_touch=width < 600)
    page = context.new_page()
    page.goto(f"{base}/admin/login")
    assert overflow(page) <= 0, f"the login page scrolls sideways at {width} px"
    log_in(page, base)
    page.goto(f"{base}/admin/draft?week={WEEK}")
    editor, previews, main = box(page, ".desk .editor"), box(page, ".desk .previews"), box(page, "#main")
    side_by_side = previews["x"] >= editor["x"] + editor["width"] - 1
    if side_by_side:
        assert editor["width"] >= MIN_COLUMN, f"the editor's column is {editor['width']} px at {width} px"
        assert previews["x"] + previews["width"] <= width, "the previews reach past the window"
    else:  # stacked: each takes the whole width of the page
        assert editor["width"] >= main["width"] - 40, (editor, main)
        assert previews["width"] >= main["width"] - 40, (previews, main)
    # a section's rename field and an entry's title have room for more than a word
    assert box(page, "form.rename input[name=name]")["width"] >= 120
    assert box(page, "li[data-entry] .etitle")["width"] >= 200
    if width >= 1440:
        assert side_by_side, f"at {width} px the previews go below the editor"

    for url in console_pages(base):
        answer = page.goto(url)
        assert answer is not None and answer.status == 200, url
        assert overflow(page) <= 0, f"{url} scrolls sideways at {width} px by {overflow(page)} px"
    context.close()


# --- the configured language ------------------------------------------------------------------

def page_words(page: Any) -> str:
    """The console's own words on a page: the text outside the feed's and the email's."""
    return str(page.evaluate(
        "() => { const main = document.body.cloneNode(true);"
        " main.querySelectorAll('.etitle, .desc, .sname, .papers, .url, td:first-child, iframe, input,"
        " .brand a, [data-feed] strong, select option').forEach(n => n.remove());"
        " return main.innerText; }"))


def test_the_console_speaks_chinese_when_the_digest_does(browser, console_zh):  # noqa: F811
    base = console_zh["base"]
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.goto(f"{base}/admin")
    assert page.locator("html").get_attribute("lang") == "zh-CN"
    assert page.locator("h1").inner_text() == "登录"
    page.fill("#password", "wrong password here")
    page.click("form button[type=submit]")
    assert page.locator("p.flash.bad").inner_text() == "密码不对。"
    log_in_as(page, base)
    nav = page.locator("nav").inner_text()
    for word in ("概览", "草稿", "订阅源", "订阅者", "往期周报", "退出登录"):
        assert word in nav, nav
    assert "每星期一 09:00" in page.locator("main").inner_text()  # the send day in Chinese too
    page.goto(f"{base}/admin/draft?week={WEEK}")
    assert page.locator("h1").inner_text() == f"{WEEK} 草稿"
    assert page.locator("#save-note").inner_text() == "保存编者按"
    entry = page.locator("section.section").nth(0).locator("li[data-entry]").first
    entry_id = entry.get_attribute("data-entry")
    entry.locator("form.exclude button").click()  # what an edit did, in Chinese too
    assert flash(page, "已排除出本期") == f"{WEEK}：第 {entry_id} 篇已排除出本期"
    for url in console_pages(base)[:5]:
        page.goto(url)
        english = re.findall(r"\b(?:the|and|of|to|is|Send|Save|Search|Add)\b", page_words(page))
        assert not english, f"{url}: English words in the Chinese console: {english[:10]}"
    page.close()


def test_the_console_speaks_english_when_the_digest_does(browser, console_en):  # noqa: F811
    base = console_en["base"]
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    log_in_as(page, base)
    assert page.locator("html").get_attribute("lang") == "en"
    assert "every Monday at 09:00" in page.locator("main").inner_text()
    for url in console_pages(base)[:5]:
        page.goto(url)
        assert not CJK.findall(page_words(page)), f"{url}: Chinese words in the English console"
    page.close()


def log_in_as(page: Any, base: str) -> None:
    """Log in from wherever the page is (log_in expects to start anonymous)."""
    page.goto(f"{base}/admin/login")
    page.fill("#password", PASSWORD)
    page.click("form button[type=submit]")
    page.wait_for_url(f"{base}/admin")


# --- the feeds page -----------------------------------------------------------------------------

ATOM = b"""<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>Query Papers</title><id>urn:q</id>
<updated>2026-10-01T00:00:00Z</updated>
<entry><title>Join ordering with learned cardinalities</title><id>urn:q:1</id>
<link href="https://q.example.org/1"/><updated>2026-10-01T00:00:00Z</updated>
<summary>Finding a good join order is crucial for query performance.</summary></entry>
<entry><title>Adaptive query execution</title><id>urn:q:2</id>
<link href="https://q.example.org/2"/><updated>2026-09-30T00:00:00Z</updated>
<summary>Plans that change while they run.</summary></entry>
</feed>"""


def flash(page: Any, text: str) -> str:  # noqa: F811 (test_admin_browser's, with more patience)
    """The message a change leaves on the page: however busy the machine, it comes."""
    locator = page.locator("p.flash", has_text=text)
    locator.wait_for(timeout=120_000)
    return str(locator.inner_text())


def feed_row(page: Any, url: str) -> Any:
    return page.locator("tr[data-feed]", has_text=url)


def test_feeds_are_added_paused_resumed_and_removed_in_the_console(browser, console_en, feed_server):  # noqa: F811
    base = console_en["base"]
    good = feed_server.serve("/q.xml", ATOM, headers={"Content-Type": "application/atom+xml"})
    missing = feed_server.url("/gone.xml")  # 404
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    # the page's own confirm answers yes and keeps the question: a native dialog can race
    # the click (see test_admin_browser)
    context.add_init_script("window.__asked = []; window.confirm = function (question) {"
                            " window.__asked.push(question); return true; };")
    page = context.new_page()
    log_in(page, base)
    page.click("nav >> text=Feeds")
    page.wait_for_url(f"{base}/admin/feeds")
    assert page.locator("tr[data-feed]").count() == 1  # the fixture feed

    page.fill("#url", good)
    page.fill("#feed-name", "Databases")
    page.click("#add-feed")
    assert "2 new entries" in flash(page, "added")
    row = feed_row(page, good)
    assert "Databases" in row.inner_text() and row.locator(".badge.ok").is_visible()
    assert any(path == "/q.xml" for path, _ in feed_server.requests)  # polled at once
    with console_en["factory"]() as session:
        from bot.ingest import queries
        [feed] = [f for f in queries.all_feeds(session) if f.url == good]
        assert feed.name == "Databases" and feed.last_success_at is not None

    page.fill("#url", missing)
    page.click("#add-feed")
    message = flash(page, "first poll failed")
    assert "404" in message and "stays added" in message
    assert feed_row(page, missing).locator(".badge.bad").is_visible()  # its health: failing

    # a path on the server's disk is refused, and nothing is read or added
    page.goto(f"{base}/admin/feeds")
    page.evaluate("document.getElementById('url').type = 'text'")
    page.fill("#url", "/etc/passwd")
    page.click("#add-feed")
    assert "only http(s) feeds" in flash(page, "Not done")
    assert feed_row(page, "/etc/passwd").count() == 0

    feed_row(page, good).locator("form.pause button").click()
    flash(page, "paused: it is not polled")
    assert feed_row(page, good).locator(".badge", has_text="paused").is_visible()
    feed_row(page, good).locator("form.resume button").click()
    flash(page, "resumed: the next poll")  # not the pause's "... until resumed"
    feed_row(page, missing).locator("form.remove button").click()
    assert "removed" in flash(page, "removed")
    assert page.evaluate("window.__asked")[-1].startswith("Remove feed ")
    assert feed_row(page, missing).count() == 0
    with console_en["factory"]() as session:
        statuses = {f.url: f.status for f in queries.all_feeds(session, include_removed=True)}
    assert statuses[good] == "active" and statuses[missing] == "removed"
    context.close()


def test_posting_a_file_url_is_refused_without_a_browser(console_en):
    import httpx
    from test_admin_security import CSRF

    base = console_en["base"]
    with httpx.Client(base_url=base, timeout=30) as client:
        token = CSRF.search(client.get("/admin/login").text)[1]
        client.post("/admin/login", data={"csrf": token, "password": PASSWORD, "next": "/admin"})
        token = CSRF.search(client.get("/admin/feeds").text)[1]
        for url in ("file:///etc/passwd", "/etc/hostname", "C:/feeds/x.xml"):
            answer = client.post("/admin/feeds/add", data={"csrf": token, "url": url},
                                 follow_redirects=True)
            assert "only http(s) feeds" in answer.text, url
    with console_en["factory"]() as session:
        from bot.ingest import queries
        assert [f.url for f in queries.all_feeds(session, include_removed=True)] == \
            [f.url for f in queries.all_feeds(session)]  # nothing added, nothing removed
        assert not any("passwd" in f.url or "hostname" in f.url or "x.xml" in f.url
                       for f in queries.all_feeds(session, include_removed=True))


# --- CSV import and names ------------------------------------------------------------------------

def test_a_csv_import_with_names_in_the_console(browser, console_en, tmp_path, smtp_server):  # noqa: F811
    base = console_en["base"]
    path = tmp_path / "readers.csv"
    path.write_text("name,email\nCarla Díaz,carla@example.org\n,dan@example.org\nEve,not-an-address\n"
                    "Ann again,ADA@example.org\n", encoding="utf-8")
    page = browser.new_page(viewport={"width": 1024, "height": 900})
    log_in(page, base)
    page.goto(f"{base}/admin/subscribers")
    page.set_input_files("#file", str(path))
    page.check("form.import input[name=confirmed]")
    page.click("#import")
    page.wait_for_url(f"{base}/admin/subscribers/import")
    assert page.locator("#summary").count() == 1, page.content()[:3000]
    summary = page.locator("#summary").inner_text()
    assert "4 lines read: 3 addresses taken, 0 repeated lines skipped, 1 rejected." in summary
    assert page.locator("tr[data-verdict=rejected]").inner_text().startswith("4")
    assert page.locator("tr[data-verdict=already]", has_text="ada@example.org").count() == 1
    assert smtp_server.messages == []  # confirmed: no mail

    page.goto(f"{base}/admin/subscribers?q=carla")
    assert "Carla Díaz" in page.locator("tbody tr").first.inner_text()
    page.goto(f"{base}/admin/subscribers?q=d%C3%ADaz")  # search by name
    assert page.locator("tbody tr").count() == 1
    page.locator("tbody tr a").first.click()
    assert page.locator("#sub-name").inner_text() == "Carla Díaz"

    page.goto(f"{base}/admin/subscribers")
    page.fill("#email", "fay@example.org")
    page.fill("#name", "Fay")
    page.check("form.add input[name=confirmed]")
    page.click("form.add button")
    flash(page, "fay@example.org added")
    body = httpx_export(page, base)
    assert "carla@example.org,confirmed," in body and "name" in body.splitlines()[0].split(",")
    assert any(line.startswith("carla@example.org,") and ",Carla Díaz," in line for line in body.splitlines())
    assert any(line.startswith("fay@example.org,") and ",Fay," in line for line in body.splitlines())
    page.close()


def httpx_export(page: Any, base: str) -> str:
    """The export, fetched with the page's session."""
    answer = page.request.get(f"{base}/admin/subscribers.csv")
    assert answer.status == 200
    return str(answer.text())


def test_an_import_without_a_token_or_a_file_is_refused(console_en):
    import httpx
    from test_admin_security import CSRF

    base = console_en["base"]
    with httpx.Client(base_url=base, timeout=30) as client:
        token = CSRF.search(client.get("/admin/login").text)[1]
        client.post("/admin/login", data={"csrf": token, "password": PASSWORD, "next": "/admin"})
        files = {"file": ("x.csv", b"email\nmallory@example.org\n", "text/csv")}
        assert client.post("/admin/subscribers/import", files=files).status_code == 403  # no CSRF
        token = CSRF.search(client.get("/admin/subscribers").text)[1]
        empty = client.post("/admin/subscribers/import", data={"csrf": token},
                            files={"file": ("x.csv", b"", "text/csv")}, follow_redirects=True)
        assert "no file, or an empty one" in empty.text
        too_big = client.post("/admin/subscribers/import", data={"csrf": token},
                              files={"file": ("x.csv", b"a@example.org\n" * 500_000, "text/csv")})
        assert too_big.status_code == 413  # 7 MB: over the import's limit
        anonymous = httpx.post(f"{base}/admin/subscribers/import", files=files, timeout=30)
        assert anonymous.status_code == 401
    with console_en["factory"]() as session:
        from bot import subscribers
        assert "mallory@example.org" not in {s.email for s in subscribers.iter_subscribers(session)}


def test_an_import_larger_than_a_form_is_taken(console_en):
    """The app refuses bodies over 10 KB; the import path takes a real list."""
    import httpx
    from test_admin_security import CSRF

    base = console_en["base"]
    body = "email,name\n" + "".join(f"reader{n}@example.org,Reader {n}\n" for n in range(3000))
    assert len(body) > 80_000
    with httpx.Client(base_url=base, timeout=120) as client:
        token = CSRF.search(client.get("/admin/login").text)[1]
        client.post("/admin/login", data={"csrf": token, "password": PASSWORD, "next": "/admin"})
        token = CSRF.search(client.get("/admin/subscribers").text)[1]
        done = client.post("/admin/subscribers/import", data={"csrf": token, "confirmed": "yes"},
                           files={"file": ("list.csv", body.encode(), "text/csv")})
        assert done.status_code == 200, done.text[:500]
        assert "3000 lines read: 3000 addresses taken" in done.text
        subscribe = client.post("/admin/subscribers/add", data={"csrf": token, "email": "x" * 20_000})
        assert subscribe.status_code == 413  # every other form keeps the 10 KB limit
    with console_en["factory"]() as session:
        from bot import subscribers
        names = {s.email: s.name for s in subscribers.iter_subscribers(session)}
    assert names["reader2999@example.org"] == "Reader 2999" and len(names) == 3002


# --- section descriptions in the console -----------------------------------------------------------

def test_the_editor_renames_keeps_writes_and_clears_a_description(browser, console_en):  # noqa: F811
    base = console_en["base"]
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    log_in(page, base)
    page.goto(f"{base}/admin/draft?week={WEEK}")
    first = page.locator("section.section").nth(0)
    assert first.locator("form.describe input[name=description]").input_value() == ""  # English: none

    page.fill("#desc-1", "Papers that share a benchmark")
    first.locator("form.describe button").click()
    flash(page, "described as")
    assert page.locator("section.section").nth(0).locator(".desc").inner_text() == \
        "Papers that share a benchmark"
    page.frame_locator("iframe.wide").locator("text=Papers that share a benchmark").wait_for()

    page.fill("#name-1", "Benchmarks")  # the editor's description stays with a rename
    page.locator("section.section").nth(0).locator("form.rename button").click()
    flash(page, "renamed to")
    assert page.locator("section.section").nth(0).locator(".desc").inner_text() == \
        "Papers that share a benchmark"

    page.fill("#desc-1", "")
    page.locator("section.section").nth(0).locator("form.describe button").click()
    flash(page, "has no description")
    assert page.locator("section.section").nth(0).locator(".desc").count() == 0
    page.close()
