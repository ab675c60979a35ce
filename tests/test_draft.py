"""The editor's desk as a library and on the command line: a week's edits
(exclude, move, rename, order, note), laid over the grouping; what `send`
freezes; approval; `digestbot draft ...` and `digestbot admin hash-password`.

Real SQLite (Alembic), the real fixture feed, the real grouping and renderer.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import FEED_FIXTURE, FreshDB
from sqlalchemy import select
from test_admin_security import log_in, password_hash, serve  # noqa: F401 (serve and password_hash: fixtures)
from test_digest import W40, add_entry, make_feed, poll_fixture

from bot.cli import cli
from bot.config import Settings
from bot.digest import build_digest
from bot.digest import draft as drafts
from bot.digest.edits import WeekEdits, _order, apply_edits
from bot.digest.note import MAX_NOTE, NoteError, note_html
from bot.digest.schedule import next_send_time, scheduled_week
from bot.digest.views import CATCH_ALL
from bot.models import DigestEntry, Entry
from bot.passwords import verify_password
from bot.render import digest_json, render_digest
from bot.send import send_digest
from bot.themes import load_themes

WEEK = W40.label


@pytest.fixture
def polled(fresh_db: FreshDB, settings: Settings) -> Settings:
    poll_fixture(settings, fresh_db.factory)
    return settings


def week40(fresh_db: FreshDB, settings: Settings) -> drafts.Draft:
    with fresh_db.factory() as session:
        return drafts.load_draft(session, settings, W40)


def section_names(draft: drafts.Draft) -> list[str]:
    return [theme.name for theme in draft.data.themes]


# --- the pure part --------------------------------------------------------------------------

def test_order_puts_named_sections_first_and_the_rest_as_grouped():
    grouped = ["a", "b", "new", "c", "catch-all"]
    assert _order(grouped, ["c", "a"]) == ["c", "a", "b", "new", "catch-all"]
    assert _order(grouped, []) == grouped
    assert _order(["x", "a", "b"], ["b", "a"]) == ["b", "a", "x"]
    assert _order(grouped, ["gone", "b"]) == ["b", "a", "new", "c", "catch-all"]  # "gone" is ignored
    assert _order(grouped, ["catch-all", "a"]) == ["catch-all", "a", "b", "new", "c"]


def test_no_edits_leave_the_grouping_as_it_is(fresh_db, polled):
    with fresh_db.factory() as session:
        data = build_digest(session, W40, polled)
    assert apply_edits(data, WeekEdits(WEEK), load_themes()) is data
    assert all(theme.key for theme in data.themes)
    assert data.themes[-1].key == CATCH_ALL or all(not t.catch_all for t in data.themes)


# --- edits over the grouping ----------------------------------------------------------------

def test_edits_change_the_draft_and_the_email(fresh_db, polled):
    before = week40(fresh_db, polled)
    assert before.scheduled and before.editable and not before.approved
    first, second = before.data.themes[0], before.data.themes[1]
    gone, moved = first.entries[0], second.entries[0]

    drafts.exclude(fresh_db.factory, polled, str(gone.entry_id))
    drafts.move(fresh_db.factory, polled, moved.link or "", CATCH_ALL)
    drafts.rename(fresh_db.factory, polled, first.key, "本周头条", week=WEEK)
    drafts.reorder(fresh_db.factory, polled, [second.key, first.key], week=WEEK)
    drafts.set_note(fresh_db.factory, polled, "两句**编者**的话。\n\n第二段。", week=WEEK)

    after = week40(fresh_db, polled)
    data = after.data
    assert data.entry_count == before.data.entry_count - 1
    assert gone.entry_id not in {e.entry_id for e in data.entries}
    assert [e.entry_id for e in data.excluded] == [gone.entry_id]
    assert after.section_of(moved.entry_id) == CATCH_ALL
    keys = [t.key for t in data.themes]
    if len(second.entries) > 1:  # (a section the move emptied is dropped)
        assert keys[:2] == [second.key, first.key]
    else:
        assert keys[0] == first.key
    assert keys[-1] == CATCH_ALL
    assert "本周头条" in section_names(after)
    assert data.note.startswith("两句")

    rendered = render_digest(data, polled)
    assert "本周头条" in rendered.html and "本周头条" in rendered.text
    assert gone.title not in rendered.html and gone.title not in rendered.text
    assert "<strong>编者</strong>" in rendered.html and "编者按" in rendered.html
    # the note is above the table of contents, in both parts
    body = rendered.html.index("<h1")  # (the preheader, before it, names the themes too)
    assert body < rendered.html.index("编者按") < rendered.html.index("本周主题", body)
    assert rendered.text.index("两句**编者**的话") < rendered.text.index("本周主题")
    assert f"{data.entry_count} 篇精读" in rendered.subject

    shown = digest_json(data)
    ids = [e["id"] for t in shown["themes"] for e in t["entries"]]
    assert moved.entry_id in ids and gone.entry_id not in ids
    assert shown["excluded"] == [gone.entry_id] and shown["note"] == data.note

    drafts.include(fresh_db.factory, polled, str(gone.entry_id))
    assert week40(fresh_db, polled).data.entry_count == before.data.entry_count


def test_edits_are_stored_with_the_week_and_survive_a_new_session(fresh_db, polled, make_settings):
    first = week40(fresh_db, polled).data.themes[0]
    drafts.rename(fresh_db.factory, polled, "1", "Renamed", week=WEEK)
    again = make_settings(base_url="https://digest.example.org")  # a restart: new settings, same db
    assert week40(fresh_db, again).data.themes[0].name == "Renamed"
    assert week40(fresh_db, again).data.themes[0].key == first.key
    # renamed means renamed in every language, without the file's English subtitle
    en = replace(again, language="en")
    section = render_digest(week40(fresh_db, en).data, en)
    assert "Renamed" in section.text


def test_new_entries_join_where_the_grouping_puts_them_and_edits_stay(fresh_db, polled):
    before = week40(fresh_db, polled)
    gone = before.data.themes[0].entries[0]
    drafts.exclude(fresh_db.factory, polled, str(gone.entry_id))
    drafts.rename(fresh_db.factory, polled, before.data.themes[0].key, "Kept name", week=WEEK)
    with fresh_db.factory() as session, session.begin():
        late = add_entry(session, make_feed(session), datetime(2026, 10, 1, 4, 0, tzinfo=UTC),
                         title="GRPO 信用分配新方法：过程奖励模型与步级优势估计", key="https://feed.example/new")
        late_id = late.id
    after = week40(fresh_db, polled)
    assert late_id in {e.entry_id for e in after.data.entries}
    assert gone.entry_id not in {e.entry_id for e in after.data.entries}
    assert "Kept name" in section_names(after)
    assert after.data.entry_count == before.data.entry_count  # one out, one in


def test_moving_to_a_theme_with_no_section_this_week_makes_it(fresh_db, polled):
    draft = week40(fresh_db, polled)
    absent = [c for c in draft.choices if not c.in_draft and c.key != CATCH_ALL]
    assert absent, "the fixture week should leave some theme of the themes file unused"
    entry = draft.data.themes[0].entries[0]
    message = drafts.move(fresh_db.factory, polled, str(entry.entry_id), absent[0].name)
    assert absent[0].name in message
    after = week40(fresh_db, polled)
    assert after.section_of(entry.entry_id) == absent[0].key


def test_send_freezes_the_edited_digest_and_an_excluded_entry_never_comes_back(fresh_db, polled):
    draft = week40(fresh_db, polled)
    gone = draft.data.themes[0].entries[0]
    drafts.exclude(fresh_db.factory, polled, str(gone.entry_id))
    drafts.set_note(fresh_db.factory, polled, "A note for W40.", week=WEEK)
    report = send_digest(polled, fresh_db.factory, WEEK)
    assert report.outcome == "sent"
    with fresh_db.factory() as session:
        frozen = set(session.scalars(select(DigestEntry.entry_id)))
        assert gone.entry_id not in frozen and len(frozen) == draft.data.entry_count - 1
        # the next week does not pick it up as a late addition either
        following = build_digest(session, W40.next(), polled)
    assert gone.entry_id not in {e.entry_id for e in following.entries}
    with pytest.raises(drafts.DraftError) as caught:
        drafts.include(fresh_db.factory, polled, str(gone.entry_id), week=WEEK)
    assert "has been sent" in caught.value.message and caught.value.hint


def test_any_edit_withdraws_the_approval(fresh_db, polled):
    assert "approved" in drafts.approve(fresh_db.factory, polled, week=WEEK)
    assert week40(fresh_db, polled).approved
    message = drafts.rename(fresh_db.factory, polled, "1", "Changed", week=WEEK)
    assert "approval was withdrawn" in message
    assert not week40(fresh_db, polled).approved


def test_entries_stored_after_the_approval_wait_for_the_next_digest(fresh_db, polled):
    """Approved "as it stands": an entry polled after the approval is not sent unseen with the week;
    the next digest takes it as a late addition, and a new approval takes it in."""
    approved_at = datetime.now(UTC)
    drafts.approve(fresh_db.factory, polled, week=WEEK, now=approved_at)
    before = week40(fresh_db, polled)
    assert before.approved and before.waiting_note is None
    with fresh_db.factory() as session, session.begin():
        entry = add_entry(session, make_feed(session), datetime(2026, 10, 2, 4, 0, tzinfo=UTC),
                          title="GRPO 信用分配：迟到的一篇", key="https://feed.example/after-approval")
        entry.first_seen_at = approved_at + timedelta(minutes=1)  # polled a minute after the approval
        arrived = entry.id
    after = week40(fresh_db, polled)
    assert arrived not in {e.entry_id for e in after.data.entries}
    assert after.data.entry_count == before.data.entry_count and after.data.after_approval == 1
    assert after.waiting_note and "1 entry stored since the approval waits" in after.waiting_note

    # withdrawn and given again, the approval takes it in
    drafts.withdraw_approval(fresh_db.factory, polled, week=WEEK)
    assert arrived in {e.entry_id for e in week40(fresh_db, polled).data.entries}
    drafts.approve(fresh_db.factory, polled, week=WEEK, now=approved_at)  # as if approved before it came

    report = send_digest(polled, fresh_db.factory, WEEK)
    assert report.outcome == "sent" and report.recipients == 0
    with fresh_db.factory() as session:
        assert arrived not in set(session.scalars(select(DigestEntry.entry_id)))
        following = build_digest(session, W40.next(), polled)
    late = {e.entry_id: e.late for e in following.entries}
    assert late.get(arrived) is True  # sent the next week, marked as a late addition
    assert week40(fresh_db, polled).waiting_note is None  # sent: nothing waits any more


def test_the_console_says_what_waits_after_the_approval(
        fresh_db, polled, serve, password_hash):  # noqa: F811 (the console's fixtures, imported above)
    approved_at = datetime.now(UTC)
    drafts.approve(fresh_db.factory, polled, week=WEEK, now=approved_at)
    with fresh_db.factory() as session, session.begin():
        entry = add_entry(session, make_feed(session), datetime(2026, 10, 2, 4, 0, tzinfo=UTC),
                          title="迟到的一篇", key="https://feed.example/after-approval-console")
        entry.first_seen_at = approved_at + timedelta(minutes=1)
    server = serve(admin_password_hash=password_hash)
    with server.client() as client:
        assert log_in(client).status_code == 303
        page = client.get("/admin/draft", params={"week": WEEK})
    assert page.status_code == 200
    assert "1 entry stored since the approval waits for the next digest" in page.text
    assert "迟到的一篇" not in page.text.split('id="state"')[1].split("</section>")[0]


def test_entries_and_sections_are_named_clearly_or_refused(fresh_db, polled):
    with pytest.raises(drafts.DraftError) as caught:
        drafts.exclude(fresh_db.factory, polled, "999999")
    assert "no entry 999999" in caught.value.message and "--format json" in str(caught.value.hint)
    with pytest.raises(drafts.DraftError) as caught:
        drafts.exclude(fresh_db.factory, polled, "https://nowhere.example/x")
    assert "no entry has the link" in caught.value.message
    entry = week40(fresh_db, polled).data.themes[0].entries[0]
    with pytest.raises(drafts.DraftError) as caught:
        drafts.move(fresh_db.factory, polled, str(entry.entry_id), "no such section")
    assert "no section" in caught.value.message and CATCH_ALL in str(caught.value.hint)
    with pytest.raises(drafts.DraftError) as caught:  # rename: only a section of this week's draft
        drafts.rename(fresh_db.factory, polled, "99", "x", week=WEEK)
    assert "no section '99'" in caught.value.message
    with pytest.raises(drafts.DraftError) as caught:  # not in that week
        drafts.exclude(fresh_db.factory, polled, str(entry.entry_id), week="2026-W39")
    assert "not in the draft of 2026-W39" in caught.value.message and WEEK in str(caught.value.hint)


def test_the_default_week_is_the_one_the_next_send_covers(fresh_db, polled):
    now = datetime(2026, 10, 7, 12, 0, tzinfo=UTC)  # a Wednesday of W41, no W41 entries
    with fresh_db.factory() as session:
        assert next_send_time(polled, now).date().isoformat() == "2026-10-12"
        assert scheduled_week(session, polled, now) == W40  # the newest week with entries
        assert drafts.week_for(session, polled, None, now) == W40
        assert drafts.week_for(session, polled, "2026-W39", now).label == "2026-W39"


# --- the note ---------------------------------------------------------------------------------

def test_the_note_is_sanitised_markdown():
    html = note_html("# Big\n\n**bold** <script>alert(1)</script> <b onclick=x>raw</b>\n\n"
                     "[bad](javascript:alert(1)) [ok](https://example.org/a) <img src=x onerror=y>")
    assert "<h3>Big</h3>" in html and "<strong>bold</strong>" in html
    # raw HTML is text, never markup
    assert "<script" not in html and "<img" not in html and "<b " not in html
    assert "&lt;script&gt;" in html and "&lt;b onclick=x&gt;" in html
    assert "javascript:" not in html.replace("[bad](javascript:alert(1))", "")
    assert '<a href="https://example.org/a" rel="noopener noreferrer">ok</a>' in html
    assert note_html("   \n") == ""
    with pytest.raises(NoteError) as caught:
        note_html("x" * (MAX_NOTE + 1))
    assert caught.value.hint


# --- the command line -------------------------------------------------------------------------

@pytest.fixture
def env(fresh_db: FreshDB, tmp_path: Path, polled: Settings) -> dict[str, str]:
    return {
        "DIGESTBOT_DATABASE_URL": fresh_db.url,
        "DIGESTBOT_FEED_URLS": str(FEED_FIXTURE),
        "DIGESTBOT_OUTBOX_DIR": str(tmp_path / "outbox"),
        "DIGESTBOT_SECRET_KEY": "test-secret-key-not-for-production",
        "DIGESTBOT_BASE_URL": "https://digest.example.org",
        "DIGESTBOT_CONFIG": "",
    }


def run(env: dict[str, str], *args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, input=stdin, catch_exceptions=False)


def test_cli_edits_a_week_as_preview_json_names_its_entries(env, fresh_db, polled, tmp_path):
    preview = json.loads(run(env, "preview", "--week", WEEK, "--format", "json").output)
    first = preview["themes"][0]["entries"][0]
    second = preview["themes"][1]["entries"][0]
    assert isinstance(first["id"], int) and preview["themes"][0]["key"]

    shown = run(env, "draft", "show")
    assert shown.exit_code == 0, shown.output
    assert shown.output.startswith(f"{WEEK} (2026-09-28 – 2026-10-04): not approved")
    assert str(first["id"]) in shown.output and first["title"] in shown.output

    out = run(env, "draft", "exclude", str(first["id"]))
    assert out.exit_code == 0 and f"{WEEK}: entry {first['id']}" in out.output and "left out" in out.output
    out = run(env, "draft", "move", second["link"], CATCH_ALL)
    assert out.exit_code == 0 and "moved to" in out.output, out.output
    out = run(env, "draft", "rename", "1", "Editor's pick", "--week", WEEK)
    assert out.exit_code == 0 and "renamed to “Editor's pick”" in out.output, out.output
    note = tmp_path / "note.md"
    note.write_text("Two lines of **mine**.\nSecond line.\n", encoding="utf-8")
    out = run(env, "draft", "note", "--file", str(note))
    assert out.exit_code == 0 and "note saved" in out.output, out.output
    out = run(env, "draft", "approve")
    assert out.exit_code == 0 and f"{WEEK}: approved" in out.output

    data = json.loads(run(env, "draft", "show", "--format", "json").output)
    assert data["excluded"] == [first["id"]] and data["approved_at"] and data["note"].startswith("Two")
    assert data["themes"][0]["name"] == "Editor's pick"
    text = run(env, "preview", "--week", WEEK, "--format", "text").output
    assert "Two lines of **mine**." in text and first["title"] not in text

    listing = run(env, "draft", "show").output
    assert "approved" in listing and "left out:" in listing and "Two lines" in listing


def test_cli_errors_are_messages_with_hints(env, fresh_db, polled):
    out = CliRunner().invoke(cli, ["draft", "exclude", "424242"], env=env)
    assert out.exit_code == 1 and "error: there is no entry 424242" in out.output
    assert "hint:" in out.output and "Traceback" not in out.output
    out = CliRunner().invoke(cli, ["draft", "rename", "nope", "x", "--week", WEEK], env=env)
    assert out.exit_code == 1 and "has no section 'nope'" in out.output
    out = CliRunner().invoke(cli, ["draft", "note", "--file", "/nonexistent/note.md"], env=env)
    assert out.exit_code == 1 and "the note /nonexistent/note.md does not exist" in out.output
    out = CliRunner().invoke(cli, ["draft", "show", "--week", "2026-W99"], env=env)
    assert out.exit_code == 1 and "has no ISO week 99" in out.output


def test_every_draft_command_has_help(env):
    for command in ("show", "exclude", "include", "move", "rename", "order", "note", "approve"):
        out = run(env, "draft", command, "--help")
        assert out.exit_code == 0 and "--week" in out.output, command
    assert "hash-password" in run(env, "admin", "--help").output


def test_hash_password_prints_an_argon2_hash_of_the_typed_password(env):
    out = CliRunner().invoke(cli, ["admin", "hash-password"], input="correct horse battery\n" * 2,
                             env=env)
    assert out.exit_code == 0, out.output
    digest = out.output.strip().splitlines()[-1]
    assert digest.startswith("$argon2id$")
    assert verify_password(digest, "correct horse battery")
    assert not verify_password(digest, "correct horse batterx")
    short = CliRunner().invoke(cli, ["admin", "hash-password"], input="short\nshort\n", env=env)
    assert short.exit_code == 1 and "at least 10" in short.output
    mismatch = CliRunner().invoke(cli, ["admin", "hash-password"],
                                  input="correct horse battery\nsomething else entirely\n", env=env)
    assert mismatch.exit_code != 0 and "$argon2" not in mismatch.output


# --- approval ---------------------------------------------------------------------------------

def test_with_approval_required_send_waits_for_the_approval(fresh_db, make_settings, tmp_path):
    settings = make_settings(require_approval="true", base_url="https://digest.example.org")
    poll_fixture(settings, fresh_db.factory)
    from smtp import add_subscribers

    add_subscribers(fresh_db.factory, ["reader@example.org"])
    report = send_digest(settings, fresh_db.factory, WEEK)
    assert report.outcome == "awaiting-approval" and "not approved" in report.summary()
    assert not list((tmp_path / "outbox").glob("*.eml"))
    with fresh_db.factory() as session:
        assert drafts.awaiting_approval(session, settings, WEEK)
    drafts.approve(fresh_db.factory, settings, week=WEEK)
    assert send_digest(settings, fresh_db.factory, WEEK).outcome == "sent"
    assert len(list((tmp_path / "outbox").glob("*.eml"))) == 1
    # without the setting a week needs no approval (the default: sends go out on schedule)
    with fresh_db.factory() as session:
        assert not drafts.awaiting_approval(session, replace(settings, require_approval=False), "2026-W41")


def test_the_entry_counts_follow_the_edits_in_the_database(fresh_db, polled):
    draft = week40(fresh_db, polled)
    for entry in draft.data.themes[0].entries:
        drafts.exclude(fresh_db.factory, polled, str(entry.entry_id))
    after = week40(fresh_db, polled)
    assert draft.data.themes[0].key not in [t.key for t in after.data.themes]  # an emptied section goes
    with fresh_db.factory() as session:
        assert session.scalar(select(Entry).where(Entry.id == draft.data.themes[0].entries[0].entry_id))
    assert after.data.entry_count == draft.data.entry_count - len(draft.data.themes[0].entries)
