"""The console as an operator meets it (issue 35): it fits every screen from a
phone to a wide monitor, speaks the configured language, manages the feeds
and imports subscribers from CSV. Playwright driving the Debian Chromium
against `digestbot web` in a real process on 127.0.0.1 (the fixtures of
test_admin_browser.py); feeds come from the real HTTP server ``feed_server``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from test_admin_browser import WEEK, browser, flash, log_in, start_console  # noqa: F401 (browser: fixture)

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
