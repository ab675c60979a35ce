"""The editor's moves and exclusions as labels (table editor_labels) that later weeks follow, and
fit judged per feed in the digest and in `digestbot status`. Real SQLite (Alembic)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from rich.console import Console
from sqlalchemy import select
from test_digest import add_entry, make_feed, poll_fixture

from bot import status
from bot.digest import build_digest
from bot.digest import draft as drafts
from bot.digest.week import Week
from bot.models import EditorLabel
from evaluation.grouping import DEV, feed_weeks

THEMES = """
[settings]
language = "en"
[themes.planning]
name = "Planning"
keywords = ["planning", "lookahead", "tree search"]
[themes.memory]
name = "Memory"
keywords = ["memory", "episodic", "retrieval"]
"""
W40 = datetime(2026, 9, 30, 4, tzinfo=UTC)  # inside 2026-W40 in any time zone near UTC+8


def _kind(n: int) -> tuple[str, str]:
    """An entry on planning by its keywords, about recalled episodes by its other words."""
    return (f"Planning with lookahead over recalled episodes, study {n}",
            f"Tree search planning that replays recalled episodes from a forgetting-curve store, variant {n}.")


def test_entries_like_ones_the_editor_moved_follow_them_in_later_weeks(fresh_db, make_settings, tmp_path: Path):
    themes_file = tmp_path / "themes.toml"
    themes_file.write_text(THEMES, encoding="utf-8")
    settings = make_settings(themes_file=str(themes_file))
    now = W40 + timedelta(weeks=2, days=1)
    moved = []
    with fresh_db.factory() as session:
        feed = make_feed(session)
        for week in range(3):
            start = W40 + timedelta(weeks=week)
            for n in range(3):
                add_entry(session, feed, start + timedelta(hours=n), title=f"Lookahead planning for robots {week}{n}",
                          summary=f"Tree search planning for grasping, case {week}{n}.")
            if week < 2:
                for n in range(2):
                    title, summary = _kind(10 * week + n)
                    moved.append(add_entry(session, feed, start + timedelta(hours=5 + n), title=title,
                                           summary=summary).id)
        title, summary = _kind(99)
        new = add_entry(session, feed, W40 + timedelta(weeks=2, hours=7), title=title, summary=summary).id
        session.commit()
    with fresh_db.factory() as session:  # before any edit, the keywords say planning
        data = build_digest(session, Week(2026, 42), settings)
        assert next(t.key for t in data.themes for e in t.entries if e.entry_id == new) == "planning"
    for entry_id, week in zip(moved, ("2026-W40", "2026-W40", "2026-W41", "2026-W41"), strict=True):
        drafts.move(fresh_db.factory, settings, str(entry_id), "memory", week=week, now=now)
    with fresh_db.factory() as session:
        labels = session.scalars(select(EditorLabel)).all()
        assert sorted((label.week, label.theme_key, label.action) for label in labels) == [
            ("2026-W40", "memory", "move")] * 2 + [("2026-W41", "memory", "move")] * 2
        data = build_digest(session, Week(2026, 42), settings)
    section = next(t for t in data.themes for e in t.entries if e.entry_id == new)
    assert section.key == "memory"
    why = next(e.why for e in section.entries if e.entry_id == new)
    assert why is not None
    editor = next(v for v in why.votes if v.reader == "editor")
    assert "which the editor put in Memory in 2026-W4" in editor.reasons["memory"]


def test_an_exclusion_is_a_label_and_putting_it_back_clears_it(fresh_db, make_settings, tmp_path: Path):
    settings = make_settings()
    with fresh_db.factory() as session:
        entry = add_entry(session, make_feed(session), W40, title="A paper", summary="Planning.")
        session.commit()
        entry_id = entry.id
    now = W40 + timedelta(days=3)
    drafts.exclude(fresh_db.factory, settings, str(entry_id), week="2026-W40", now=now)
    with fresh_db.factory() as session:
        [label] = session.scalars(select(EditorLabel)).all()
        assert (label.action, label.theme_key, label.title) == ("exclude", None, "A paper")
    drafts.include(fresh_db.factory, settings, str(entry_id), week="2026-W40", now=now)
    with fresh_db.factory() as session:
        assert session.scalars(select(EditorLabel)).all() == []


def test_a_vision_feed_beside_the_rl_feed_is_judged_and_grouped_on_its_own(fresh_db, settings):
    """The computer-vision case: 18 vision papers in the RL feed's week 2026-W40 go to sections of
    their own, never under an RL theme, and `status` says per feed which fits."""
    poll_fixture(settings, fresh_db.factory)
    vision = [i for week in feed_weeks(DEV / "vision-en" / "vision-en.xml").values() for i in week][:18]
    with fresh_db.factory() as session:
        feed = make_feed(session, "https://vision.example/rss.xml")
        ids = {add_entry(session, feed, W40 + timedelta(hours=n), key=f"https://vision.example/{n}",
                         title=item.title, summary=item.summary).id for n, item in enumerate(vision)}
        session.commit()
        data = build_digest(session, Week(2026, 40), settings)
    for theme in data.themes:
        if ids & {e.entry_id for e in theme.entries}:
            assert theme.derived or theme.catch_all, theme.name
            assert not theme.derived or {e.entry_id for e in theme.entries} <= ids, theme.name
    assert any(not t.derived and not t.catch_all for t in data.themes)  # the RL feed keeps its themes
    report = status.gather(settings, fresh_db.engine, fresh_db.factory)
    fits = {row["feed"]: row["fits"] for row in report["themes"]["feeds"]}
    assert sorted(fits.values()) == [False, True]
    console = Console(record=True, width=200)
    status.render(report, console)
    text = console.export_text()
    assert "fits" in text and "does not fit: grouped on its own by shared terms" in text
