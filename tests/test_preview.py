"""`digestbot preview`: week choice, formats, files, empty weeks, errors, and
templates loading from a built wheel as well as from the source tree."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_digest import FIXTURE, poll_fixture

from bot.cli import cli
from bot.render import UNSUBSCRIBE_PLACEHOLDER

ROOT = Path(__file__).parent.parent


@pytest.fixture
def polled(fresh_db, make_settings):
    poll_fixture(make_settings(), fresh_db.factory)
    return fresh_db


def run(fresh_db, *args: str, **settings: str):
    """Invoke the CLI in-process with settings from the environment, as a user would."""
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("DIGESTBOT_")}
    env |= {"DIGESTBOT_DATABASE_URL": fresh_db.url, "DIGESTBOT_FEED_URLS": str(FIXTURE)}
    env |= {f"DIGESTBOT_{k.upper()}": v for k, v in settings.items()}
    return CliRunner().invoke(cli, ["preview", *args], env=env, catch_exceptions=False)


def test_preview_json_for_a_week(polled):
    result = run(polled, "--week", "2026-W40", "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["week"] == "2026-W40" and data["entry_count"] == 13
    assert not any(t["catch_all"] for t in data["themes"][:-1])  # a catch-all, if any, is last
    assert sum(len(t["entries"]) for t in data["themes"]) == 13


def test_preview_html_defaults_to_the_latest_week_under_var(polled):
    result = run(polled)
    assert result.exit_code == 0, result.output
    expected = polled.path.parent / "preview-2026-W40.html"
    assert result.stdout.strip() == f"preview of 2026-W40 (html) written to {expected}"
    html = expected.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "2026-W40" in html
    # a marked sample unsubscribe link, never the placeholder (tests/test_operator_edges.py)
    assert "<style" not in html and UNSUBSCRIBE_PLACEHOLDER not in html
    assert len(result.stdout) < 300  # the path, not the page


def test_preview_text_goes_to_stdout(polled):
    result = run(polled, "--week", "2026-W39", "--format", "text")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("强化学习 on MessageDaily · 2026 年第 39 周（9/21–9/27）")
    assert UNSUBSCRIBE_PLACEHOLDER not in result.stdout and "/unsubscribe/SAMPLE-" in result.stdout


def test_preview_in_english(polled):
    result = run(polled, "--week", "2026-W39", "--format", "text", language="en")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("强化学习 on MessageDaily · 2026-W39 (Sep 21 – Sep 27)")
    assert "Read more: https://" in result.stdout and "阅读全文" not in result.stdout


@pytest.mark.parametrize("fmt", ["html", "text", "json"])
def test_preview_out_writes_the_file(polled, tmp_path, fmt):
    out = tmp_path / "nested" / f"digest.{fmt}"
    result = run(polled, "--week", "2026-W40", "--format", fmt, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"preview of 2026-W40 ({fmt}) written to {out}"
    body = out.read_text(encoding="utf-8")
    assert "2026-W40" in body
    if fmt == "json":
        assert json.loads(body)["week"] == "2026-W40"


def test_preview_out_that_cannot_be_written_says_why(polled, tmp_path):
    blocker = tmp_path / "a file"
    blocker.write_text("not a folder", encoding="utf-8")
    out = blocker / "digest.html"
    result = run(polled, "--week", "2026-W40", "--out", str(out))  # a traceback would raise here
    assert result.exit_code == 1
    assert f"cannot write {out}" in result.stderr and "--out" in result.stderr
    assert blocker.read_text(encoding="utf-8") == "not a folder"


def test_preview_open_uses_the_browser(polled, monkeypatch):
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda url, *a, **k: opened.append(url) or True)
    result = run(polled, "--week", "2026-W40", "--open")
    assert result.exit_code == 0, result.output
    assert opened == [(polled.path.parent / "preview-2026-W40.html").resolve().as_uri()]


def test_preview_open_needs_html(polled):
    result = CliRunner().invoke(cli, ["preview", "--format", "json", "--open"],
                                env={"DIGESTBOT_DATABASE_URL": polled.url})
    assert result.exit_code == 2 and "--open needs --format html" in result.output


def test_empty_week_says_so_and_exits_0(polled):
    result = run(polled, "--week", "2026-W44", "--format", "json")
    assert result.exit_code == 0
    assert result.stdout == ""
    assert "2026-W44 has no entries, so no digest would be sent" in result.output
    assert "DIGESTBOT_SEND_EMPTY" in result.output


def test_empty_week_renders_with_send_empty(polled):
    result = run(polled, "--week", "2026-W44", "--format", "text", send_empty="true")
    assert result.exit_code == 0, result.output
    assert "本周没有新精读" in result.stdout


def test_no_entries_at_all(fresh_db):
    result = run(fresh_db)
    assert result.exit_code == 0
    assert "no complete week with entries yet" in result.output


@pytest.mark.parametrize(("week", "message"), [
    ("2026-40", "'2026-40' is not an ISO week"),
    ("2026-W54", "2026 has no ISO week 54"),
])
def test_bad_week_is_a_clean_error(polled, week, message):
    result = run(polled, "--week", week)
    assert result.exit_code == 1
    assert message in result.output and "hint:" in result.output
    assert "Traceback" not in result.output
