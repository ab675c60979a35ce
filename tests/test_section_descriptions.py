"""A section's description for one week (issue 35): a renamed section drops
its theme's description unless the editor keeps it, and `draft describe` (or
the console) writes or clears one. Real SQLite, the fixture feed, the real
grouping and renderer; the CLI through click's runner.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import FEED_FIXTURE
from test_digest import poll_fixture
from test_draft import WEEK, run, week40

from bot.digest import draft as drafts
from bot.render import render_digest, sections
from bot.templating import language


@pytest.fixture
def polled(fresh_db, settings):
    poll_fixture(settings, fresh_db.factory)
    return settings


@pytest.fixture
def env(fresh_db, tmp_path, polled) -> dict[str, str]:
    return {"DIGESTBOT_DATABASE_URL": fresh_db.url, "DIGESTBOT_FEED_URLS": str(FEED_FIXTURE),
            "DIGESTBOT_OUTBOX_DIR": str(tmp_path / "outbox"),
            "DIGESTBOT_SECRET_KEY": "test-secret-key-not-for-production",
            "DIGESTBOT_BASE_URL": "https://digest.example.org", "DIGESTBOT_CONFIG": ""}


def described_section(fresh_db, settings) -> tuple[int, str, str]:
    """(number, key, description shown) of the first section whose theme has a description."""
    draft = week40(fresh_db, settings)
    shown = sections(draft.data, language(settings.language))
    for number, (theme, section) in enumerate(zip(draft.data.themes, shown, strict=True), 1):
        if section.description and not theme.catch_all:
            return number, theme.key, section.description
    raise AssertionError("no section with a description in the fixture week")


def shown_under(fresh_db, settings, key: str) -> str:
    draft = week40(fresh_db, settings)
    for theme, section in zip(draft.data.themes, sections(draft.data, language(settings.language)),
                              strict=True):
        if theme.key == key:
            return section.description
    raise AssertionError(f"no section {key}")


def test_a_renamed_section_drops_its_themes_description(fresh_db, polled):
    number, key, description = described_section(fresh_db, polled)
    drafts.rename(fresh_db.factory, polled, str(number), "视觉论文", week=WEEK)
    assert shown_under(fresh_db, polled, key) == ""
    mail = render_digest(week40(fresh_db, polled).data, polled)
    assert "视觉论文" in mail.html and description not in mail.html and description not in mail.text


def test_a_rename_can_keep_the_description(fresh_db, polled):
    number, key, description = described_section(fresh_db, polled)
    message = drafts.rename(fresh_db.factory, polled, str(number), "视觉论文", week=WEEK,
                            keep_description=True)
    assert "description kept" in message
    assert shown_under(fresh_db, polled, key) == description
    en = replace(polled, language="en")  # the editor's words, in every language
    assert shown_under(fresh_db, en, key) == description
    # giving the section its own name back keeps what the editor kept
    drafts.rename(fresh_db.factory, polled, key, "", week=WEEK)
    assert shown_under(fresh_db, polled, key) == description


def test_describe_writes_clears_and_gives_back_a_description(fresh_db, polled):
    number, key, description = described_section(fresh_db, polled)
    drafts.describe(fresh_db.factory, polled, key, "  Papers on   seeing  ", week=WEEK)
    assert shown_under(fresh_db, polled, key) == "Papers on seeing"
    mail = render_digest(week40(fresh_db, polled).data, polled)
    assert "Papers on seeing" in mail.html  # (the text part shows no descriptions)
    drafts.describe(fresh_db.factory, polled, key, "", week=WEEK)
    assert shown_under(fresh_db, polled, key) == ""
    drafts.describe(fresh_db.factory, polled, key, None, week=WEEK)
    assert shown_under(fresh_db, polled, key) == description
    assert week40(fresh_db, polled).edits.is_empty  # nothing left of the edit


def test_describe_refuses_what_it_cannot_do(fresh_db, polled):
    with pytest.raises(drafts.DraftError, match="at most 500"):
        drafts.describe(fresh_db.factory, polled, "1", "x" * 501, week=WEEK)
    with pytest.raises(drafts.DraftError) as caught:
        drafts.describe(fresh_db.factory, polled, "99", "x", week=WEEK)
    assert caught.value.hint and "name one by key" in caught.value.hint


def test_describing_withdraws_the_approval(fresh_db, polled):
    drafts.approve(fresh_db.factory, polled, week=WEEK)
    message = drafts.describe(fresh_db.factory, polled, "1", "New words", week=WEEK)
    assert "approval was withdrawn" in message and not week40(fresh_db, polled).approved


def test_cli_describe_and_rename_keep(env, fresh_db, polled):
    number, key, description = described_section(fresh_db, polled)
    out = run(env, "draft", "rename", str(number), "视觉论文", "--keep-description", "--week", WEEK)
    assert out.exit_code == 0 and "description kept" in out.output, out.output
    assert shown_under(fresh_db, polled, key) == description
    out = run(env, "draft", "describe", key, "Seeing, this week", "--week", WEEK)
    assert out.exit_code == 0 and "described as “Seeing, this week”" in out.output, out.output
    assert shown_under(fresh_db, polled, key) == "Seeing, this week"
    out = run(env, "draft", "describe", key, "", "--week", WEEK)
    assert out.exit_code == 0 and "has no description" in out.output
    out = run(env, "draft", "describe", key, "--own", "--week", WEEK)  # renamed: none of its own
    assert out.exit_code == 0 and "its theme's description stays off" in out.output, out.output
    assert shown_under(fresh_db, polled, key) == ""
    run(env, "draft", "rename", key, "", "--week", WEEK)
    out = run(env, "draft", "describe", key, "--own", "--week", WEEK)
    assert out.exit_code == 0 and "its theme's description again" in out.output, out.output
    assert shown_under(fresh_db, polled, key) == description
    assert run(env, "draft", "describe", key, "--week", WEEK).exit_code == 2  # neither
    assert run(env, "draft", "describe", key, "x", "--own", "--week", WEEK).exit_code == 2  # both
