"""The email in a real browser engine: Debian's headless Chromium lays out the
latest week's HTML at desktop (600) and phone (375) widths.

Chromium is a system package (``make system-deps``). Without it these tests
are skipped on a workstation but fail under CI (env CI set), so a CI image
that lost it cannot pass silently.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import pytest
from test_digest import AFTER_FIXTURE, W40, poll_fixture

from bot.digest import build_digest, latest_complete_week
from bot.render import render_digest

ROOT = Path(__file__).parent.parent


from scripts import screenshot as shots  # noqa: E402


@pytest.fixture(scope="module")
def chromium() -> str:
    path = shots.find_chromium()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: install chromium and fonts-noto-cjk (make system-deps)")
        pytest.skip("chromium is not installed (make system-deps installs it)")
    return path


@pytest.fixture
def latest_html(fresh_db, make_settings, tmp_path) -> Path:
    settings = make_settings()
    poll_fixture(settings, fresh_db.factory)
    with fresh_db.factory() as session:
        week = latest_complete_week(session, settings, AFTER_FIXTURE)
        assert week == W40
        data = build_digest(session, week, settings)
    path = tmp_path / "digest.html"
    path.write_text(render_digest(data, settings).html, encoding="utf-8")
    return path


def idat_bytes(png: Path) -> bytes:
    """The decompressed image data of a PNG (all IDAT chunks)."""
    blob = png.read_bytes()
    pos, data = 8, b""
    while pos < len(blob):
        length = int.from_bytes(blob[pos:pos + 4], "big")
        kind = blob[pos + 4:pos + 8]
        if kind == b"IDAT":
            data += blob[pos + 8:pos + 8 + length]
        pos += 12 + length
    return zlib.decompress(data)


@pytest.mark.parametrize("width", [600, 375])
def test_latest_week_renders_in_chromium(chromium, latest_html, tmp_path, width):
    png = shots.screenshot(latest_html, tmp_path / f"shot-{width}.png", width, 2000,
                           chromium=chromium)
    assert png.is_file()
    assert shots.png_size(png) == (width, 2000)
    # text, chips and rules make a busy picture; a blank or failed page is a few KB
    assert png.stat().st_size > 20_000
    raw = idat_bytes(png)
    assert len(set(raw[::7])) > 40


def test_nothing_overflows_on_a_phone(chromium, latest_html, tmp_path):
    content_width, height = shots.page_size(chromium, latest_html, 375, tmp_path)
    assert content_width <= 375
    assert height > 3000  # every section laid out, not just the first screen


def test_blank_page_is_below_the_size_threshold(chromium, tmp_path):
    """Keeps the 20 KB threshold above honest."""
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>", encoding="utf-8")
    png = shots.screenshot(blank, tmp_path / "blank.png", 600, 2000, chromium=chromium)
    assert png.stat().st_size < 20_000
