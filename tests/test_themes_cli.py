"""Themes from the command line and the digest: `digestbot themes suggest`,
`digestbot preview --explain`, the "themes do not fit" fact in `status`, and
a feed of another field grouped by its own terms. Real SQLite, real polls of
fixture feeds, the CLI invoked in-process as a user would."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from rich.console import Console

from bot import ingest, status
from bot.cli import cli
from bot.digest import build_digest, parse_week
from bot.render import digest_json
from bot.themes import load_themes, parse_themes

FIXTURES = Path(__file__).parent / "fixtures"
RL_FEED = FIXTURES / "messagedaily-rl.xml"
PL_FEED = FIXTURES / "dev" / "pl-dev" / "pl-dev-en.xml"  # programming languages: not what the themes are for


def _poll(make_settings, fresh_db, feed: Path):
    settings = make_settings(feed_urls=str(feed))
    [result] = ingest.poll_feeds(settings, fresh_db.factory)
    assert result.status == "ok" and result.new > 20, result.summary()
    return settings


def _cli(fresh_db, feed: Path, *args: str, **settings: str) -> Result:
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("DIGESTBOT_")}
    env |= {"DIGESTBOT_DATABASE_URL": fresh_db.url, "DIGESTBOT_FEED_URLS": str(feed)}
    env |= {f"DIGESTBOT_{k.upper()}": v for k, v in settings.items()}
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


# --- themes suggest -----------------------------------------------------------------


def test_themes_suggest_writes_a_starter_file(fresh_db, make_settings, tmp_path):
    _poll(make_settings, fresh_db, PL_FEED)
    out = tmp_path / "themes.toml"
    result = _cli(fresh_db, PL_FEED, "themes", "suggest", "--weeks", "3", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "theme(s) suggested from 31 entries" in result.stderr
    assert "DIGESTBOT_THEMES_FILE" in result.stderr
    suggested = load_themes(out)
    assert 4 <= len(suggested.themes) <= 8 and suggested.language == "en"
    assert all(theme.description == "" for theme in suggested.themes)

    # the operator's edits are not overwritten by accident
    again = _cli(fresh_db, PL_FEED, "themes", "suggest", "--out", str(out))
    assert again.exit_code == 1 and "exists" in again.stderr and "--force" in again.stderr
    forced = _cli(fresh_db, PL_FEED, "themes", "suggest", "--out", str(out), "--force")
    assert forced.exit_code == 0, forced.output

    # one week back holds only the newest week's entries
    to_stdout = _cli(fresh_db, PL_FEED, "themes", "suggest", "--weeks", "1")
    assert to_stdout.exit_code == 0 and "from 10 entries" in to_stdout.stderr
    assert tomllib.loads(to_stdout.stdout)["settings"]["language"] == "en"

    # pointing the bot at the suggested file: the weeks group by its themes
    settings = make_settings(feed_urls=str(PL_FEED), themes_file=str(out))
    with fresh_db.factory() as session:
        data = build_digest(session, parse_week("2026-W42", settings.timezone), settings)
    assert any(not t.derived and not t.catch_all for t in data.themes)


def test_themes_suggest_to_a_folder_that_is_not_there_says_so(fresh_db, make_settings, tmp_path):
    """Seen: `themes suggest --out /nonexistent/dir/t.toml` ended in a FileNotFoundError traceback."""
    _poll(make_settings, fresh_db, PL_FEED)
    out = tmp_path / "no such folder" / "themes.toml"
    result = _cli(fresh_db, PL_FEED, "themes", "suggest", "--out", str(out))  # a traceback would raise here
    assert result.exit_code == 1
    assert f"cannot write {out}" in result.stderr and "--out" in result.stderr
    assert not out.parent.exists()


def test_themes_suggest_without_entries_says_what_to_do(fresh_db):
    result = _cli(fresh_db, PL_FEED, "themes", "suggest")
    assert result.exit_code == 1
    assert "no stored entries" in result.stderr and "digestbot poll" in result.stderr


# --- a feed the themes were not written for --------------------------------------------


def test_a_feed_of_another_field_is_grouped_by_its_own_terms(fresh_db, make_settings):
    settings = _poll(make_settings, fresh_db, PL_FEED)
    with fresh_db.factory() as session:
        data = build_digest(session, parse_week("2026-W41", settings.timezone), settings)
    assert data.entry_count == 10
    derived = [t for t in data.themes if t.derived]
    assert len(derived) >= 3 and not any(not t.derived and not t.catch_all for t in data.themes)
    doc = digest_json(data)
    assert all(t["name"] for t in doc["themes"] if not t["catch_all"])

    report = status.gather(settings, fresh_db.engine, fresh_db.factory)
    themes = report["themes"]
    assert themes["fits"] is False and themes["entries"] == 31 and themes["matched"] < 10
    console = Console(record=True, width=200)
    status.render(report, console)
    text = console.export_text()
    assert "does not fit: grouped on its own by shared terms" in text and "digestbot themes suggest" in text


def test_status_says_the_default_themes_fit_the_bundled_feed(fresh_db, make_settings):
    settings = _poll(make_settings, fresh_db, RL_FEED)
    themes = status.gather(settings, fresh_db.engine, fresh_db.factory)["themes"]
    assert themes["fits"] is True and themes["share"] > 0.9
    console = Console(record=True, width=200)
    status.render(status.gather(settings, fresh_db.engine, fresh_db.factory), console)
    text = console.export_text()
    assert "clearly fit a theme" in text and "does not fit" not in text
    assert "learned model: the theme pack's word model" in text


def test_a_broken_themes_file_is_reported_by_status(fresh_db, make_settings, tmp_path):
    broken = tmp_path / "themes.toml"
    broken.write_text("[themes]\n", encoding="utf-8")
    settings = _poll(make_settings, fresh_db, RL_FEED)
    settings = make_settings(feed_urls=str(RL_FEED), themes_file=str(broken))
    themes = status.gather(settings, fresh_db.engine, fresh_db.factory)["themes"]
    assert "defines no themes" in themes["error"] and themes["fits"] is False


# --- preview --explain ----------------------------------------------------------------


@pytest.fixture
def polled_rl(fresh_db, make_settings):
    _poll(make_settings, fresh_db, RL_FEED)
    return fresh_db


def test_preview_explain_json_gives_reason_terms_and_scores(polled_rl):
    result = _cli(polled_rl, RL_FEED, "preview", "--week", "2026-W40", "--format", "json", "--explain")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    entries = [entry for theme in data["themes"] for entry in theme["entries"]]
    assert len(entries) == 13
    for theme in data["themes"]:
        for entry in theme["entries"]:
            why = entry["why"]
            # every entry of this week has keywords; the other readers may have moved it from its
            # keyword theme, never out of the themes
            assert why["reason"] in {"best_theme", "lone_theme", "fallback_theme", "readers"}
            assert why["theme"] == theme["key"]
            # each reader's points, side by side
            assert list(why["readers"]) == ["keywords", "words", "feed", "editor"]
            assert why["readers"]["keywords"]["points"], why
            best = why["scores"][0]
            assert best["score"] > 0 and best["hits"] and {"term", "field", "points"} <= set(best["hits"][0])
    credit = next(e for e in entries if e["title"].startswith("信用分配四重奏"))
    assert credit["why"]["scores"][0]["theme"] == "credit_assignment"
    assert any(h["term"] == "信用分配" and h["field"] == "title" for h in credit["why"]["scores"][0]["hits"])

    plain = _cli(polled_rl, RL_FEED, "preview", "--week", "2026-W40", "--format", "json")
    assert all("why" not in e for t in json.loads(plain.stdout)["themes"] for e in t["entries"])


def test_preview_explain_text_follows_the_digest(polled_rl):
    result = _cli(polled_rl, RL_FEED, "preview", "--week", "2026-W40", "--format", "text", "--explain")
    assert result.exit_code == 0, result.output
    digest_part, _, explained = result.stdout.partition("Why each entry is where it is (--explain)")
    assert "信用分配四重奏" in digest_part and explained
    assert explained.count("    why: ") == 13
    assert "[credit_assignment]" in explained and "credit_assignment: " in explained
    assert "[title]" in explained


def test_preview_explain_needs_text_or_json(polled_rl):
    result = _cli(polled_rl, RL_FEED, "preview", "--explain")
    assert result.exit_code == 2 and "--explain needs --format text or --format json" in result.output


def test_explanations_of_another_field_name_the_shared_terms(fresh_db, make_settings):
    _poll(make_settings, fresh_db, PL_FEED)
    result = _cli(fresh_db, PL_FEED, "preview", "--week", "2026-W41", "--format", "json", "--explain")
    data = json.loads(result.stdout)
    derived = [e for t in data["themes"] if not t["catch_all"] for e in t["entries"]]
    assert derived and all(e["why"]["reason"] == "themes_do_not_fit" for e in derived)
    assert all(e["why"]["shared_terms"] for e in derived)


def test_suggested_file_round_trips_through_the_loader(fresh_db, make_settings):
    _poll(make_settings, fresh_db, RL_FEED)
    result = _cli(fresh_db, RL_FEED, "themes", "suggest", "--weeks", "6")
    parsed = parse_themes(result.stdout, "stdout")
    assert parsed.language == "zh" and parsed.themes


# --- names per language -----------------------------------------------------------------


def test_the_service_warns_at_start_about_themes_without_a_name_in_the_language(
    fresh_db, make_settings, tmp_path, caplog
):
    from bot.service import Service

    path = tmp_path / "themes.toml"
    path.write_text('[themes.a]\nname = "甲"\nname_en = "A"\nkeywords = ["a"]\n'
                    '[themes.b]\nname = "乙"\nkeywords = ["b"]\n', encoding="utf-8")
    for language, expected in (("en", True), ("zh", False)):
        caplog.clear()
        settings = make_settings(themes_file=str(path), language=language)
        service = Service(settings, fresh_db.engine, fresh_db.factory)
        with caplog.at_level("WARNING", logger="bot.service"):
            service.start()
            service.stop()
        warned = [r.getMessage() for r in caplog.records if "no name in language" in r.getMessage()]
        assert bool(warned) is expected, warned
        if expected:
            assert str(path) in warned[0] and "(b)" in warned[0] and "name_en" in warned[0]
