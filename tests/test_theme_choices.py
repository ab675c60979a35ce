"""Themes per reader (issue 36): a reader chooses sections on the CLI or on the
web page their digest links to, and the copy they receive holds exactly those,
then "also this week". Mail goes to the real SMTP server (aiosmtpd); the send
runs in-process and, for kill -9, as a real `digestbot send` process.
"""

from __future__ import annotations

import csv
import io
import logging
import os
import re
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from conftest import FEED_FIXTURE, FreshDB
from helpers import Digestbot, any_db, wait_until
from smtp import SmtpServer, add_subscribers, ledger
from sqlalchemy import func, select
from test_admin_security import password_hash, serve  # noqa: F401 (fixtures)
from test_digest import W40, poll_fixture

from bot import choices, render, subscribers
from bot.cli import cli
from bot.config import Settings
from bot.digest import DigestData, build_digest
from bot.models import Delivery, DigestVariant, Subscriber
from bot.send import send_digest
from bot.templating import language
from bot.tokens import Tokens

WEEK = "2026-W40"
PREFERENCES_LINK = re.compile(r"https?://[^\s\"<>]+/preferences/([A-Za-z0-9_.-]+)")


# --- helpers --------------------------------------------------------------------------------

def cli_env(settings: Settings, tmp_path: Path) -> dict[str, str]:
    """The environment that gives the CLI ``settings``' database, SMTP server and links."""
    env = {"DIGESTBOT_DATABASE_URL": settings.database_url, "DIGESTBOT_FEED_URLS": str(FEED_FIXTURE),
           "DIGESTBOT_OUTBOX_DIR": str(tmp_path / "outbox"), "DIGESTBOT_CONFIG": "",
           "DIGESTBOT_SECRET_KEY": "test-secret-key-not-for-production",
           "DIGESTBOT_BASE_URL": settings.base_url, "DIGESTBOT_FROM_ADDR": settings.from_addr,
           "DIGESTBOT_EMBED_ENTRIES": "false", "DIGESTBOT_SMTP_HOST": settings.smtp_host or ""}
    if settings.smtp_host:
        env |= {"DIGESTBOT_SMTP_PORT": str(settings.smtp_port), "DIGESTBOT_SMTP_SECURITY": "none"}
    return env


def run(env: dict[str, str], *args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, input=stdin, catch_exceptions=False)


def the_week(settings: Settings, factory: Any) -> DigestData:
    with factory() as session:
        return build_digest(session, W40.with_timezone(settings.timezone), settings)


def titles(data: DigestData, keys: set[str] | None = None) -> list[str]:
    """The entry titles of the week's sections (of ``keys`` only, if given)."""
    return [entry.title for theme in data.themes if keys is None or theme.key in keys
            for entry in theme.entries]


def copies(smtp_server: SmtpServer) -> dict[str, tuple[str, str, str]]:
    """address -> (subject, text part, html part) of each message received."""
    found = {}
    for received in smtp_server.messages:
        msg = received.message
        text = msg.get_body(("plain",)).get_content()  # type: ignore[union-attr]
        html = msg.get_body(("html",)).get_content()  # type: ignore[union-attr]
        found[str(msg["To"]).lower()] = (str(msg["Subject"]), text, html)
    return found


def count_renders(monkeypatch: pytest.MonkeyPatch) -> list[frozenset[str]]:
    """The choices every copy is made for, by either way of making one (the
    whole digest's render counts as the empty choice)."""
    made: list[frozenset[str]] = []
    whole, cut = render.render_digest, render.ChoiceCopies.render

    def rendered(data: DigestData, settings: Settings, choice: frozenset[str] = frozenset()) -> Any:
        if not choice:
            made.append(choice)
        return whole(data, settings, choice)

    def copied(self: render.ChoiceCopies, choice: frozenset[str]) -> Any:
        made.append(choice)
        return cut(self, choice)

    monkeypatch.setattr(render, "render_digest", rendered)
    monkeypatch.setattr(render.ChoiceCopies, "render", copied)
    return made


def without_links(text: str) -> str:
    return re.sub(r"/(preferences|unsubscribe)/[A-Za-z0-9_.-]+", r"/\1/TOKEN", text)


def reader_of(link_token: str, settings: Settings) -> int:
    return Tokens.from_settings(settings).read_preferences(link_token).subscriber_id


def ids_of(factory: Any) -> dict[str, int]:
    with factory() as session:
        return {sub.email: sub.id for sub in subscribers.list_subscribers(session)}


@pytest.fixture
def polled(smtp_settings: Settings, fresh_db: FreshDB) -> Settings:
    poll_fixture(smtp_settings, fresh_db.factory)
    return smtp_settings


# --- the CLI sets a choice; each reader's copy shows it ------------------------------------------

def test_a_test_copy_carries_the_sample_preferences_link(
        polled: Settings, fresh_db: FreshDB, smtp_server: SmtpServer) -> None:
    from bot.mailer import PREFERENCES_PLACEHOLDER

    send_digest(polled, fresh_db.factory, WEEK, to="editor@example.org")
    [(_, text, html)] = copies(smtp_server).values()
    for part in (text, html):
        assert PREFERENCES_PLACEHOLDER not in part
        assert "/preferences/SAMPLE-each-reader-gets-their-own-link" in part


@any_db
def test_a_choice_set_on_the_cli_is_the_copy_each_reader_receives(
        polled: Settings, fresh_db: FreshDB, smtp_server: SmtpServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    settings, lang = polled, language(polled.language)
    add_subscribers(fresh_db.factory, ["ada@example.org", "bo@example.org", "cy@example.org",
                                       "dee@example.org"])
    env = cli_env(settings, tmp_path)
    # given in any order: the copy keeps the digest's order
    chose = run(env, "subscribers", "themes", "ada@example.org", "coding_agents", "credit_assignment")
    assert chose.exit_code == 0, chose.output
    assert "ada@example.org: themes coding_agents, credit_assignment" in chose.output
    assert run(env, "subscribers", "themes", "bo@example.org", "harness_engineering").exit_code == 0
    assert run(env, "subscribers", "themes", "dee@example.org", "credit_assignment",
               "coding_agents").exit_code == 0
    renders = count_renders(monkeypatch)

    report = send_digest(settings, fresh_db.factory, WEEK)

    assert (report.outcome, report.sent) == ("sent", 4), report
    # one render for the whole digest, one per distinct choice: not one per reader
    assert sorted(sorted(c) for c in renders) == [
        [], ["coding_agents", "credit_assignment"], ["harness_engineering"]]
    data = the_week(settings, fresh_db.factory)
    got = copies(smtp_server)
    subject, text, html = got["ada@example.org"]
    mine = {"credit_assignment", "coding_agents"}
    for title in titles(data, mine):
        assert title in text and title in html
    for title in titles(data):
        if title not in titles(data, mine):
            assert title not in text and title not in html
    names = {theme.key: theme.name for theme in data.themes}
    # the digest's order: credit assignment comes first in the week, coding agents last
    assert text.index(names["credit_assignment"]) < text.index(names["coding_agents"])
    also = text[text.index(lang.gettext("Also this week")):]
    for key, theme in ((t.key, t) for t in data.themes if t.key not in mine):
        assert lang.gettext("%(name)s (%(num)s)", name=theme.name, num=len(theme.entries)) in also, key
    assert f"{settings.base_url}/archive/{WEEK}" in also
    assert names["credit_assignment"] in subject and names["coding_agents"] in subject
    assert names["harness_engineering"] not in subject
    # the same choice, the same copy: only the personal links differ
    assert without_links(got["dee@example.org"][1]) == without_links(text)

    bo_subject, bo_text, _ = got["bo@example.org"]
    assert titles(data, {"harness_engineering"})
    assert all(title in bo_text for title in titles(data, {"harness_engineering"}))
    assert not any(title in bo_text for title in titles(data, mine))
    assert names["harness_engineering"] in bo_subject

    cy_subject, cy_text, _ = got["cy@example.org"]  # no choice: the whole digest, as before
    assert all(title in cy_text for title in titles(data))
    assert lang.gettext("Also this week") not in cy_text
    assert cy_subject == report.subject

    # every copy links to its own reader's preferences page
    ids = ids_of(fresh_db.factory)
    for address, (_, body, page) in got.items():
        token = PREFERENCES_LINK.search(body)
        assert token is not None, address
        assert reader_of(token.group(1), settings) == ids[address]
        assert f"/preferences/{token.group(1)}" in page
    with fresh_db.factory() as session:
        assert session.scalar(select(func.count()).select_from(DigestVariant)) == 2


def test_choices_that_give_the_same_sections_this_week_share_one_render(
        polled: Settings, fresh_db: FreshDB, smtp_server: SmtpServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    readers = {"a@example.org": "coding_agents", "b@example.org": "benchmarks,coding_agents",
               "c@example.org": "benchmarks", "d@example.org": "reward_models",
               "e@example.org": None}
    add_subscribers(fresh_db.factory, list(readers))
    with fresh_db.factory() as session, session.begin():
        for sub in session.scalars(select(Subscriber)):
            sub.themes = readers[sub.email]
    renders = count_renders(monkeypatch)

    assert send_digest(polled, fresh_db.factory, WEEK).sent == 5

    # the whole digest, coding agents (benchmarks has no entry this week), and "none this week"
    assert len(renders) == 3, renders
    got = {address: without_links(text) for address, (_, text, _) in copies(smtp_server).items()}
    assert got["a@example.org"] == got["b@example.org"].replace("b@", "a@")
    assert got["c@example.org"] == got["d@example.org"].replace("d@", "c@")
    assert got["c@example.org"] != got["e@example.org"].replace("e@", "c@")  # it says why it is whole


def test_a_reader_whose_themes_have_nothing_this_week_gets_everything_saying_so(
        polled: Settings, fresh_db: FreshDB, smtp_server: SmtpServer, tmp_path: Path) -> None:
    settings, lang = polled, language(polled.language)
    add_subscribers(fresh_db.factory, ["ada@example.org"])
    data = the_week(settings, fresh_db.factory)
    assert "benchmarks" not in {theme.key for theme in data.themes}  # no entry this week
    assert run(cli_env(settings, tmp_path), "subscribers", "themes", "ada@example.org",
               "benchmarks").exit_code == 0

    assert send_digest(settings, fresh_db.factory, WEEK).sent == 1

    subject, text, _ = copies(smtp_server)["ada@example.org"]
    line = lang.gettext("None of your themes has new deep reads this week, so here is the whole digest.")
    assert text.count(line) == 1
    assert all(title in text for title in titles(data))
    assert lang.gettext("Also this week") not in text


def test_derived_sections_and_the_catch_all_go_under_also_this_week(polled: Settings,
                                                                   fresh_db: FreshDB) -> None:
    data = the_week(polled, fresh_db.factory)
    first = data.themes[0]
    # the same key as a theme, but derived, and a catch-all: neither can be chosen
    odd = (first.__class__(name="自动", name_en="Auto", description="", catch_all=False,
                           entries=data.themes[1].entries, derived=True, key=first.key),
           first.__class__(name="更多", name_en="More", description="", catch_all=True,
                           entries=data.themes[2].entries, key=first.key))
    week = data.__class__(week=data.week, themes=(first, *odd), entry_count=data.entry_count,
                          paper_count=data.paper_count)
    rendered = render.render_digest(week, polled, frozenset({first.key}))
    lang = language(polled.language)
    head, also = rendered.text.split(lang.gettext("Also this week"), 1)
    assert all(entry.title in head for entry in first.entries)
    assert not any(entry.title in rendered.text for entry in odd[0].entries + odd[1].entries)
    assert "自动" in also and "更多" in also


@pytest.mark.parametrize("choice", [
    {"coding_agents"}, {"credit_assignment", "coding_agents"}, {"benchmarks"},
    {"harness_engineering", "benchmarks"},
    {"credit_assignment", "on_policy_distillation", "harness_engineering", "environments_infra",
     "safety_security", "skills_memory_context", "coding_agents"}])
def test_a_copy_cut_from_the_one_rendering_is_the_copy_rendered_for_the_choice(
        polled: Settings, fresh_db: FreshDB, choice: set[str]) -> None:
    data = the_week(polled, fresh_db.factory)
    cut = render.ChoiceCopies(data, polled).render(frozenset(choice))
    whole = render.render_digest(data, polled, frozenset(choice))

    def tags(html: str) -> str:  # the markers out, and the whitespace between tags
        return re.sub(r">\s+<", "><", re.sub(r"<!--/?dbp[^>]*-->", "", html)).strip()

    assert tags(cut.html) == tags(whole.html)
    assert "dbp:" not in cut.html and "dbv" not in cut.html
    assert (cut.subject, cut.text, cut.preheader) == (whole.subject, whole.text, whole.preheader)


def test_a_choice_shows_every_entry_of_its_sections_however_small_the_cap(
        make_settings: Callable[..., Settings], fresh_db: FreshDB) -> None:
    settings = make_settings(max_entries=2)
    poll_fixture(settings, fresh_db.factory)
    data = the_week(settings, fresh_db.factory)
    whole = render.render_digest(data, settings)
    mine = render.render_digest(data, settings, frozenset({"credit_assignment", "harness_engineering"}))
    assert sum(title in whole.text for title in titles(data)) == 2  # the cap applies to the whole
    chosen = titles(data, {"credit_assignment", "harness_engineering"})
    assert len(chosen) == 5 and all(title in mine.text for title in chosen)
    assert mine.archive_html is None  # its links go to the whole digest's web copy
    names = {theme.key: theme.name for theme in data.themes}
    # the inbox preview names the reader's sections, not the others
    assert names["credit_assignment"] in mine.preheader and names["harness_engineering"] in mine.preheader
    assert names["coding_agents"] not in mine.preheader and names["coding_agents"] in whole.preheader


# --- the CLI's answers ---------------------------------------------------------------------------

def test_the_themes_command_refuses_what_it_cannot_do_and_all_gives_everything(
        polled: Settings, fresh_db: FreshDB, tmp_path: Path) -> None:
    env = cli_env(polled, tmp_path)
    add_subscribers(fresh_db.factory, ["ada@example.org"])
    unknown = run(env, "subscribers", "themes", "ada@example.org", "coding_agents", "no_such_theme")
    assert unknown.exit_code == 1
    assert "no such theme in the themes file: no_such_theme" in unknown.output
    assert "hint:" in unknown.output and "credit_assignment" in unknown.output
    nobody = run(env, "subscribers", "themes", "zed@example.org", "coding_agents")
    assert nobody.exit_code == 1 and "zed@example.org is not a subscriber" in nobody.output
    both = run(env, "subscribers", "themes", "ada@example.org", "coding_agents", "--all")
    assert both.exit_code == 2 and "not both" in both.output

    def stored() -> str | None:
        with fresh_db.factory() as session:
            return session.scalar(select(Subscriber.themes))

    assert stored() is None  # nothing was changed by the refusals
    assert run(env, "subscribers", "themes", "ADA@example.org", "coding_agents").exit_code == 0
    assert stored() == "coding_agents"
    reset = run(env, "subscribers", "themes", "ada@example.org", "--all")
    assert reset.exit_code == 0 and "ada@example.org: every section" in reset.output
    assert stored() is None
    assert run(env, "subscribers", "themes", "ada@example.org", "coding_agents").exit_code == 0
    assert run(env, "subscribers", "themes", "ada@example.org").exit_code == 0  # no keys: everything
    assert stored() is None


def test_a_theme_that_leaves_the_themes_file_is_dropped_from_every_choice(
        polled: Settings, fresh_db: FreshDB, smtp_server: SmtpServer,
        caplog: pytest.LogCaptureFixture) -> None:
    add_subscribers(fresh_db.factory, ["ada@example.org", "bo@example.org"])
    with fresh_db.factory() as session, session.begin():  # chosen while the themes were there
        ada, bo = session.scalars(select(Subscriber).order_by(Subscriber.id)).all()
        ada.themes, bo.themes = "coding_agents,retired_theme", "retired_theme"
    with caplog.at_level(logging.WARNING, logger="bot.choices"):
        assert send_digest(polled, fresh_db.factory, WEEK).sent == 2
    assert "'retired_theme' is no longer in the themes file: dropped from 2 reader(s)" in caplog.text
    with fresh_db.factory() as session:
        assert dict(session.execute(select(Subscriber.email, Subscriber.themes)).tuples().all()) == {
            "ada@example.org": "coding_agents", "bo@example.org": None}
    data = the_week(polled, fresh_db.factory)
    got = copies(smtp_server)
    assert titles(data, {"coding_agents"})[0] in got["ada@example.org"][1]
    assert not any(title in got["ada@example.org"][1] for title in titles(data, {"credit_assignment"}))
    assert all(title in got["bo@example.org"][1] for title in titles(data))  # left with none: everything


# --- CSV -------------------------------------------------------------------------------------------

def test_export_writes_the_choices_and_import_reads_a_themes_column(
        polled: Settings, fresh_db: FreshDB, tmp_path: Path) -> None:
    env = cli_env(polled, tmp_path)
    add_subscribers(fresh_db.factory, ["ada@example.org", "bo@example.org"])
    assert run(env, "subscribers", "themes", "ada@example.org", "credit_assignment",
               "coding_agents").exit_code == 0
    exported = list(csv.DictReader(io.StringIO(run(env, "subscribers", "export").output)))
    assert {row["email"]: row["themes"] for row in exported} == {
        "ada@example.org": "coding_agents credit_assignment", "bo@example.org": ""}

    upload = tmp_path / "readers.csv"
    upload.write_text("email,themes\n"
                      "bo@example.org,harness_engineering; coding_agents\n"
                      "cy@example.org,safety_security\n"
                      "dee@example.org,no_such_theme\n"
                      "ada@example.org,\n", encoding="utf-8")
    result = run(env, "subscribers", "import", "--confirmed", str(upload))
    assert result.exit_code == 0, result.output
    assert "line 4: rejected: no such theme in the themes file: no_such_theme" in result.output
    assert "4 line(s) read: 3 address(es)" in result.output and "1 rejected" in result.output
    with fresh_db.factory() as session:
        assert dict(session.execute(select(Subscriber.email, Subscriber.themes)).tuples().all()) == {
            "ada@example.org": "coding_agents,credit_assignment",  # a blank cell changes nothing
            "bo@example.org": "coding_agents,harness_engineering",
            "cy@example.org": "safety_security"}  # dee's line was refused: not added


# --- operator's view -------------------------------------------------------------------------------

def test_status_counts_the_readers_per_chosen_theme(polled: Settings, fresh_db: FreshDB,
                                                    tmp_path: Path) -> None:
    import json

    env = cli_env(polled, tmp_path)
    add_subscribers(fresh_db.factory, ["ada@example.org", "bo@example.org", "cy@example.org"])
    add_subscribers(fresh_db.factory, ["gone@example.org"], status="unsubscribed")
    run(env, "subscribers", "themes", "ada@example.org", "credit_assignment", "coding_agents")
    run(env, "subscribers", "themes", "bo@example.org", "coding_agents")
    with fresh_db.factory() as session, session.begin():
        session.scalars(select(Subscriber).where(Subscriber.email == "gone@example.org")).one() \
            .themes = "coding_agents"  # not confirmed: not counted
    result = run(env, "status", "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["theme_choices"] == {
        "everything": 1, "coding_agents": 2, "credit_assignment": 1}
    table = run(env, "status", "--format", "table")
    assert "themes chosen: coding_agents 2, credit_assignment 1; 1 get every section" in table.output


def test_the_console_shows_the_counts_and_a_readers_themes(
        serve: Any, password_hash: str, fresh_db: FreshDB) -> None:  # noqa: F811 (fixtures)
    from test_admin_security import log_in

    ids = add_subscribers(fresh_db.factory, ["ada@example.org", "bo@example.org", "cy@example.org"])
    with fresh_db.factory() as session, session.begin():
        for sub, themes in zip(session.scalars(select(Subscriber).order_by(Subscriber.id)),
                               ("coding_agents,credit_assignment", "coding_agents", None), strict=True):
            sub.themes = themes
    server = serve(admin_password_hash=password_hash)
    with server.client() as client:
        assert log_in(client).status_code == 303
        listing = client.get("/admin/subscribers")
        assert listing.status_code == 200
        counts = re.search(r'<p class="muted" id="theme-choices">(.*?)</p>', listing.text, re.S)
        assert counts is not None
        assert counts.group(1) == ("Themes chosen: coding_agents 2 · credit_assignment 1; "
                                   "1 confirmed get every section")
        one = client.get(f"/admin/subscribers/{ids[0]}")
        assert "Themes: coding_agents, credit_assignment" in one.text
        assert "Themes: every section" in client.get(f"/admin/subscribers/{ids[2]}").text


# --- the ledger's guarantees with choices ----------------------------------------------------------

def test_kill_9_mid_send_with_choices_gives_each_reader_one_copy_of_their_own(
        polled: Settings, fresh_db: FreshDB, smtp_server: SmtpServer, digestbot: Digestbot,
        tmp_path: Path) -> None:
    readers = [f"reader{n:02d}@example.org" for n in range(12)]
    add_subscribers(fresh_db.factory, readers)
    chosen = {address: ("coding_agents" if n % 3 == 0 else "harness_engineering" if n % 3 == 1 else None)
              for n, address in enumerate(readers)}
    with fresh_db.factory() as session, session.begin():
        for sub in session.scalars(select(Subscriber)):
            sub.themes = chosen[sub.email]
    env = cli_env(polled, tmp_path) | {"DIGESTBOT_SMTP_CONNECTIONS": "1"}
    smtp_server.delay = 0.2  # each message: 0.2 s between its data and the server's 250
    proc = digestbot.start("send", "--week", WEEK, env=env)
    try:
        reached = wait_until(lambda: proc.poll() is not None or (
            len(smtp_server.messages) >= 4 and smtp_server.handler.in_data.is_set()), 60, 0.002)
        assert proc.poll() is None, proc.communicate()
        assert reached, "the send did not get going"
        os.kill(proc.pid, signal.SIGKILL)  # mid-DATA of the fifth message
    finally:
        proc.wait(10)
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert wait_until(lambda: not smtp_server.handler.in_data.is_set())
    first = {str(r.message["To"]): str(r.message["Message-ID"]) for r in smtp_server.messages}
    # the reader's choice changes while the send is stopped: their copy was fixed with their row
    late = next(address for address in readers if address not in first and chosen[address] is None)
    with fresh_db.factory() as session, session.begin():
        session.scalars(select(Subscriber).where(Subscriber.email == late)).one().themes = "safety_security"

    smtp_server.delay = 0.0
    again = digestbot.start("send", "--week", WEEK, env=env)
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err

    assert smtp_server.copies_by_recipient() == {r: 1 for r in readers}
    with fresh_db.factory() as session:
        digest_id = session.scalar(select(DigestVariant.digest_id))
        assert session.scalar(select(func.count()).select_from(DigestVariant)) == 2
    assert set(ledger(fresh_db.factory, digest_id).values()) == {"sent"}
    data = the_week(polled, fresh_db.factory)
    got = copies(smtp_server)
    for address, choice in chosen.items():
        text = got[address][1]
        keys = choices.decode(choice)
        expected = titles(data, set(keys)) if keys else titles(data)
        assert all(title in text for title in expected), address
        assert not any(t in text for t in titles(data) if t not in expected), address
    for received in smtp_server.messages:  # those sent before the kill kept their Message-ID
        address = str(received.message["To"])
        if address in first:
            assert str(received.message["Message-ID"]) == first[address]


# --- the second personal link ------------------------------------------------------------------

@pytest.mark.parametrize("offset", [0, 1, 56, 57, 58, 200])
def test_both_personal_links_are_filled_in_wherever_they_sit(settings: Settings, offset: int) -> None:
    from email import message_from_bytes, policy

    from bot.mailer import PREFERENCES_PLACEHOLDER, UNSUBSCRIBE_PLACEHOLDER, DigestMessage

    text = ("t" * offset + PREFERENCES_PLACEHOLDER + "\nmid " + UNSUBSCRIBE_PLACEHOLDER + "\n"
            + PREFERENCES_PLACEHOLDER)
    html = f'{"前" * offset}<a href="{UNSUBSCRIBE_PLACEHOLDER}">u</a><a href="{PREFERENCES_PLACEHOLDER}">p</a>'
    message = DigestMessage(settings, "s", html, text)
    data = message.render("a@example.com", "<1@x>", "https://x/u/tok", preferences_url="https://x/p/tok")
    got_text, got_html = (p.get_content() for p in message_from_bytes(
        data, policy=policy.default).iter_parts())  # type: ignore[attr-defined]
    assert got_text == ("t" * offset + "https://x/p/tok\nmid https://x/u/tok\nhttps://x/p/tok").replace(
        "\n", "\r\n")
    assert got_html == f'{"前" * offset}<a href="https://x/u/tok">u</a><a href="https://x/p/tok">p</a>'
    # a test copy has no reader: the marked sample, never a placeholder
    sample = message.render("a@example.com", "<2@x>", "https://x/u/sample").decode("ascii")
    assert PREFERENCES_PLACEHOLDER not in sample


def test_a_feed_cannot_collect_the_readers_preferences_links(
        make_settings: Callable[..., Settings], fresh_db: FreshDB, tmp_path: Path) -> None:
    import email
    from email import policy

    from test_hostile import item, rss

    from bot import ingest
    from bot.mailer import PREFERENCES_PLACEHOLDER

    evil = f"http://evil.example/track?u={PREFERENCES_PLACEHOLDER}"
    feed = tmp_path / "evil.xml"
    feed.write_bytes(rss([item(1, link=evil, title=f"Look {PREFERENCES_PLACEHOLDER} here",
                               desc=f"See {PREFERENCES_PLACEHOLDER}, {evil}")]))
    settings = make_settings(feed_urls=str(feed), base_url="https://digest.example.org")
    ingest.poll_feeds(settings, fresh_db.factory)
    add_subscribers(fresh_db.factory, ["ann@example.org", "bob@example.org"])
    data = the_week(settings, fresh_db.factory)
    with fresh_db.factory() as session, session.begin():  # bob chose the week's one section
        session.scalars(select(Subscriber).where(Subscriber.email == "bob@example.org")).one().themes = \
            data.themes[0].key if not data.themes[0].derived and not data.themes[0].catch_all else "coding_agents"
    assert send_digest(settings, fresh_db.factory, WEEK).sent == 2
    for path in sorted((tmp_path / "outbox").glob("*.eml")):
        message = email.message_from_bytes(path.read_bytes(), policy=policy.default)
        for part in ("plain", "html"):
            body = message.get_body((part,)).get_content()  # type: ignore[attr-defined]
            assert PREFERENCES_PLACEHOLDER not in body
            assert "evil.example/track?u=http" not in body
            assert "/preferences/" in body


@pytest.mark.parametrize("code", ["zh", "en"])
def test_the_themes_offered_are_named_in_the_sites_language(code: str) -> None:
    from bot.themes import load_themes

    themes = load_themes(None)
    offered = choices.options(themes, code)
    assert [option.key for option in offered] == [theme.key for theme in themes.themes]
    first = themes.themes[0]
    assert offered[0].name == (first.name if code == themes.language else first.name_en)
    assert bool(offered[0].description) == (code == themes.language)  # descriptions are in the file's language


@any_db
def test_a_resend_takes_each_readers_choice_as_it_is_now(
        polled: Settings, fresh_db: FreshDB, smtp_server: SmtpServer) -> None:
    add_subscribers(fresh_db.factory, ["ada@example.org", "bo@example.org"])
    assert send_digest(polled, fresh_db.factory, WEEK).sent == 2
    data = the_week(polled, fresh_db.factory)
    assert all(title in copies(smtp_server)["ada@example.org"][1] for title in titles(data))
    with fresh_db.factory() as session, session.begin():
        session.scalars(select(Subscriber).where(Subscriber.email == "ada@example.org")).one() \
            .themes = "coding_agents"
    smtp_server.messages.clear()
    assert send_digest(polled, fresh_db.factory, WEEK, resend=True).sent == 2
    got = copies(smtp_server)
    assert not any(title in got["ada@example.org"][1] for title in titles(data, {"credit_assignment"}))
    assert all(title in got["ada@example.org"][1] for title in titles(data, {"coding_agents"}))
    assert all(title in got["bo@example.org"][1] for title in titles(data))


def test_a_row_another_run_made_after_this_one_started_still_gets_its_readers_copy(
        polled: Settings, fresh_db: FreshDB) -> None:
    from datetime import UTC, datetime

    from bot.db import transaction
    from bot.mailer import DigestMessage
    from bot.send import ledger
    from bot.send.variants import CopyBook

    add_subscribers(fresh_db.factory, ["ada@example.org"])
    assert send_digest(polled, fresh_db.factory, WEEK).sent == 1
    with fresh_db.factory() as session:
        digest_id = session.scalar(select(Delivery.digest_id))
    book = CopyBook(polled, fresh_db.factory, digest_id, WEEK)  # this run: nobody with a choice
    assert len(book) == 0
    # meanwhile another run gives a newly confirmed reader with a choice a row
    add_subscribers(fresh_db.factory, ["bo@example.org"])
    with transaction(fresh_db.factory) as session:
        session.scalars(select(Subscriber).where(Subscriber.email == "bo@example.org")).one() \
            .themes = "coding_agents"
        session.flush()
        assert ledger.create_pending_deliveries(session, digest_id, datetime.now(UTC)) == 1
    whole = DigestMessage(polled, "whole", "<p>x</p>", "x")
    found = book.get("coding_agents", whole)
    assert found is not whole
    name = next(t.name for t in the_week(polled, fresh_db.factory).themes if t.key == "coding_agents")
    assert name in found.subject
    assert book.get("coding_agents", whole) is found  # looked for once
