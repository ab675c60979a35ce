"""What a new operator tripped over (issue 15), each pinned by a test:

1. previews show a marked sample unsubscribe link, never the placeholder;
2. a test copy says it is one, has no List-Unsubscribe, and `send --to` names its .eml;
3. `preview --open` without a browser says so and prints the path;
4. summaries are cut at a sentence or clause boundary;
5. `preview` says what it wrote;
6. every report shows times in the configured zone, labelled;
7. list output into a pipe is tab-separated and whole, and --format csv|json works;
8. `run` logs no uvicorn INFO lines, `poll` shows each error once;
9. the unsubscribe page names the address, masked;
10. docker-compose.yml: no unread setting, Mailpit's UI on 127.0.0.1 only;
11. the email fits a 320 px phone with long English titles, labels and URLs
    (real Chromium through Playwright, measuring document.scrollWidth).
"""

from __future__ import annotations

import csv
import email
import io
import json
import os
import re
import shutil
import signal
import webbrowser
from collections.abc import Iterator
from email import policy
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from conftest import FEED_FIXTURE, FeedServer, FreshDB
from helpers import free_port
from smtp import add_subscribers

from bot.cli import cli
from bot.digest import build_digest, parse_week, trim_summary
from bot.render import UNSUBSCRIBE_PLACEHOLDER, render_digest, sample_unsubscribe_url

ROOT = Path(__file__).parent.parent
WEEK = "2026-W40"  # the newest complete week of the fixture feed
BASE_URL = "https://digest.example.org"


@pytest.fixture
def env(fresh_db: FreshDB, tmp_path: Path) -> dict[str, str]:
    """Settings as a user gives them: the environment, nothing else."""
    return {
        "DIGESTBOT_DATABASE_URL": fresh_db.url,
        "DIGESTBOT_FEED_URLS": str(FEED_FIXTURE),
        "DIGESTBOT_OUTBOX_DIR": str(tmp_path / "outbox"),
        "DIGESTBOT_SECRET_KEY": "test-secret-key-not-for-production",
        "DIGESTBOT_BASE_URL": BASE_URL,
        "DIGESTBOT_SMTP_HOST": "",
        "DIGESTBOT_CONFIG": "",
    }


def run(env: dict[str, str], *args: str) -> Result:
    """The CLI in-process; its stdout is not a terminal, as in a pipe."""
    clean: dict[str, str | None] = {k: None for k in os.environ if k.startswith("DIGESTBOT_")}
    return CliRunner().invoke(cli, list(args), env=clean | env, catch_exceptions=False)


@pytest.fixture
def polled(env: dict[str, str]) -> dict[str, str]:
    result = run(env, "poll")
    assert result.exit_code == 0, result.output
    return env


# --- 1, 5. previews: a marked sample link, and a line saying what was written ---------------

SAMPLE = sample_unsubscribe_url(BASE_URL)


def test_preview_text_shows_the_sample_link_not_the_placeholder(polled):
    result = run(polled, "preview", "--week", WEEK, "--format", "text")
    assert result.exit_code == 0, result.output
    assert UNSUBSCRIBE_PLACEHOLDER not in result.stdout
    assert result.stdout.rstrip().endswith(f"退订：{SAMPLE}")
    assert "SAMPLE" in SAMPLE and SAMPLE.startswith(f"{BASE_URL}/unsubscribe/")


def test_preview_html_says_what_it_wrote_and_links_the_sample(polled, tmp_path):
    result = run(polled, "preview")
    assert result.exit_code == 0, result.output
    [line] = result.stdout.splitlines()
    path = Path(line.split(" written to ", 1)[1])
    assert line == f"preview of {WEEK} (html) written to {path}"
    html = path.read_text(encoding="utf-8")
    assert UNSUBSCRIBE_PLACEHOLDER not in html and f'href="{SAMPLE}"' in html
    out = tmp_path / "w40.json"
    result = run(polled, "preview", "--format", "json", "--out", str(out))
    assert result.stdout.strip() == f"preview of {WEEK} (json) written to {out}"


# --- 3. preview --open without a browser -------------------------------------------------

@pytest.fixture
def no_browser(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A machine with no browser at all: no BROWSER, no display, nothing on PATH
    that webbrowser knows (it looks its candidates up afresh)."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    for name in ("BROWSER", "DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(webbrowser, "_tryorder", None)
    monkeypatch.setattr(webbrowser, "_browsers", {})


def test_preview_open_without_a_browser_says_so_and_names_the_file(polled, no_browser):
    result = run(polled, "preview", "--open")
    assert result.exit_code == 0, result.output
    path = (Path(polled["DIGESTBOT_DATABASE_URL"].removeprefix("sqlite:///")).parent
            / f"preview-{WEEK}.html").resolve()
    assert path.is_file()
    assert f"no web browser found to open it: open {path} yourself" in result.stderr


def test_preview_open_with_a_browser_opens_the_file(polled, no_browser, monkeypatch, tmp_path):
    opened = tmp_path / "opened.txt"
    fake = tmp_path / "fake-browser"
    fake.write_text(f"#!/bin/sh\nprintf '%s' \"$1\" > {opened}\n", encoding="utf-8")
    fake.chmod(0o755)
    monkeypatch.setenv("BROWSER", str(fake))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # for the script's sh
    result = run(polled, "preview", "--open")
    assert result.exit_code == 0, result.output
    assert "no web browser" not in result.output
    assert opened.read_text(encoding="utf-8").startswith("file://")
    assert opened.read_text(encoding="utf-8").endswith(f"/preview-{WEEK}.html")


# --- 2. a test copy says it is one --------------------------------------------------------

NOTICE_ZH = "测试邮件：用“digestbot send --to”只发给了这个地址，订阅者都没有收到；其中的退订链接只是示例。"


@pytest.mark.parametrize("frozen", [False, True], ids=["live", "frozen"])
def test_a_test_copy_says_so_and_has_no_one_click_header(polled, fresh_db, tmp_path, frozen):
    if frozen:  # the week was sent: the test copy is the frozen email
        add_subscribers(fresh_db.factory, ["reader@example.org"])
        assert run(polled, "send").exit_code == 0
        for done in (tmp_path / "outbox").glob("*.eml"):
            done.unlink()
    result = run(polled, "send", "--to", "editor@example.org")
    assert result.exit_code == 0, result.output
    [eml] = (tmp_path / "outbox").glob("*.eml")
    assert f"test message of {WEEK} sent to editor@example.org: written to {eml}" in result.stdout
    msg = email.message_from_bytes(eml.read_bytes(), policy=policy.default)
    assert msg["Subject"].startswith("[TEST] ")
    assert msg["List-Unsubscribe"] is None and msg["List-Unsubscribe-Post"] is None
    text = msg.get_body(("plain",)).get_content()
    html = msg.get_body(("html",)).get_content()
    assert text.startswith(NOTICE_ZH)
    assert html.count(NOTICE_ZH) == 2  # the banner and the footer
    for part in (text, html):
        assert "你收到这封邮件，是因为你订阅了" not in part  # the untrue "you subscribed"
        assert UNSUBSCRIBE_PLACEHOLDER not in part and SAMPLE in part


def test_a_real_digest_keeps_its_one_click_header(polled, fresh_db, tmp_path):
    """The other side of the test above: subscribers' copies are unchanged."""
    add_subscribers(fresh_db.factory, ["reader@example.org"])
    assert run(polled, "send").exit_code == 0
    [eml] = (tmp_path / "outbox").glob("*.eml")
    msg = email.message_from_bytes(eml.read_bytes(), policy=policy.default)
    assert msg["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert f"{BASE_URL}/unsubscribe/" in msg["List-Unsubscribe"]
    text = msg.get_body(("plain",)).get_content()
    assert "你收到这封邮件，是因为你订阅了" in text and NOTICE_ZH not in text and "SAMPLE" not in text


# --- 4. summaries are cut at a boundary ---------------------------------------------------

def test_a_summary_is_cut_at_the_last_clause_end_not_mid_clause():
    # a sentence end early, a clause end late: the later boundary wins
    text = "第一句。" + "甲" * 100 + "；且与轨迹级奖励对齐" + "乙" * 200
    trimmed = trim_summary(text, 180)
    assert trimmed == "第一句。" + "甲" * 100 + "…"
    # only a short sentence in reach: still a whole sentence, not 179 characters cut mid-clause
    text = "短句。" + "丙" * 400
    assert trim_summary(text, 180) == "短句。"


def test_a_summary_with_no_sentence_or_clause_end_is_cut_at_a_comma_then_mid_clause():
    assert trim_summary("甲" * 100 + "，" + "乙" * 200, 180) == "甲" * 100 + "…"
    text = "Agents learn " + "quickly and " * 30
    assert trim_summary(text.replace("and", "and. Then", 1), 60) == "Agents learn quickly and."
    hard = trim_summary("字" * 500, 180)
    assert hard == "字" * 179 + "…"


def test_the_example_feed_is_cut_at_its_last_boundary_in_reach():
    """Every long summary of the bundled feed: cut at a sentence, clause or
    comma end within 180 characters, never before the last sentence or clause
    end in reach (issue 35: the budget is filled with whole clauses)."""
    from bot.digest.text import _CLAUSE_END, _COMMA, _SENTENCE_END, clean_line
    from bot.ingest import parse as parsing

    feed = ROOT / "bot" / "data" / "messagedaily-rl.xml"
    texts = [clean_line(e.summary_text or "") for e in parsing.parse(feed.read_bytes(), "x").entries]
    long = [t for t in texts if len(t) > 180]
    assert len(long) > 50
    for text in long:
        ends = [m.end() for p in (_SENTENCE_END, _CLAUSE_END) for m in p.finditer(text)
                if m.end() <= 180]
        trimmed = trim_summary(text, 180)
        assert len(trimmed) <= 180
        if not ends:
            continue
        last = max(ends)
        boundaries = ends + [m.end() for m in _COMMA.finditer(text) if m.end() <= 180]
        at_sentence = any(trimmed == text[:end] for end in boundaries)
        at_clause = any(trimmed == text[:end].rstrip(" ,，、；;") + "…" for end in boundaries)
        assert at_sentence or at_clause, (trimmed[-30:], text[last - 30:last])
        assert len(trimmed) >= last - 1, (trimmed[-30:], text[last - 30:last])


# --- 6, 7. one time rule, and lists that survive a pipe ------------------------------------

ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[+-]\d\d:\d\d|Z)?")


def test_every_report_uses_the_configured_zone(polled, fresh_db):
    env = polled | {"DIGESTBOT_TIMEZONE": "America/Sao_Paulo"}  # -03:00 all year
    add_subscribers(fresh_db.factory, ["reader@example.org"])
    assert run(env, "send").exit_code == 0
    stamps = []
    for args in (["feeds"], ["subscribers", "list"], ["status"]):
        result = run(env, *args, "--format", "json")
        assert result.exit_code == 0, result.output
        found = ISO.findall(result.stdout)
        assert found, args
        stamps += found
        table = run(env, *args, "--format", "table")
        assert "times in America/Sao_Paulo" in table.stdout, args
        assert "-03:00" in table.stdout and " UTC" not in table.stdout, args
    assert len(stamps) >= 8 and all(stamp.endswith("-03:00") for stamp in stamps), stamps


LONG = "a.very.long.address.of.somebody.who.left@subdomain.example.org"


def test_lists_into_a_pipe_are_tab_separated_and_whole(polled, fresh_db, digestbot):
    add_subscribers(fresh_db.factory, [LONG], status="unsubscribed")
    add_subscribers(fresh_db.factory, ["reader@example.org"])
    subs = digestbot.run("subscribers", "list", env=polled)  # stdout is a pipe
    assert subs.returncode == 0, subs.stderr
    lines = subs.stdout.splitlines()
    assert lines[0].split("\t") == ["email", "status", "created_at", "confirmed_at", "left_at",
                                    "hard_failures", "reason"]
    rows = {line.split("\t")[0]: line.split("\t") for line in lines[1:]}
    assert set(rows) == {LONG, "reader@example.org"} and rows[LONG][1] == "unsubscribed"
    assert ISO.fullmatch(rows[LONG][2]) and "…" not in subs.stdout
    assert "2 shown; 1 confirmed" in subs.stderr  # the count is for a person, not the data

    feeds = digestbot.run("feeds", env=polled)
    [header, row] = [line.split("\t") for line in feeds.stdout.splitlines()]
    assert dict(zip(header, row, strict=True))["url"] == str(FEED_FIXTURE)

    status = digestbot.run("status", env=polled)
    facts = dict(line.split("\t", 1) for line in status.stdout.splitlines()[1:])
    assert facts["feeds.1.url"] == str(FEED_FIXTURE) and facts["subscribers.unsubscribed"] == "1"
    assert facts["schedule.timezone"] == "Asia/Shanghai"


def test_every_list_command_takes_csv_and_json(polled, fresh_db):
    add_subscribers(fresh_db.factory, [LONG], status="unsubscribed")
    as_csv = run(polled, "subscribers", "list", "--format", "csv")
    [header, row] = list(csv.reader(io.StringIO(as_csv.stdout)))
    assert header[:2] == ["email", "status"] and row[:2] == [LONG, "unsubscribed"]
    assert json.loads(run(polled, "subscribers", "list", "--format", "json").stdout)[0]["email"] == LONG
    [feed] = csv.DictReader(io.StringIO(run(polled, "feeds", "--format", "csv").stdout))
    assert feed["url"] == str(FEED_FIXTURE) and feed["entries"] == "77"
    assert json.loads(run(polled, "feeds", "--format", "json").stdout)[0]["entries"] == 77
    status = list(csv.reader(io.StringIO(run(polled, "status", "--format", "csv").stdout)))
    assert status[0] == ["key", "value"] and ["subscribers.unsubscribed", "1"] in status
    assert json.loads(run(polled, "status", "--format", "json").stdout)["subscribers"]["total"] == 1


def test_status_names_the_last_send_once(polled, fresh_db):
    add_subscribers(fresh_db.factory, ["reader@example.org"])
    assert run(polled, "send").exit_code == 0
    table = run(polled, "status", "--format", "table").stdout
    [line] = [line for line in table.splitlines() if line.startswith("last digest")]
    assert re.fullmatch(r"last digest  2026-W40: sent \d{4}-\d\d-\d\d \d\d:\d\d \+08:00; "
                        r"deliveries: 1 sent, 0 failed, 0 pending", line), line
    assert "sent, sent" not in table


# --- 8. logging: no uvicorn chatter at INFO, one line per poll error -------------------------

UVICORN_INFO = ("Started server process", "Waiting for application startup",
                "Application startup complete", "Uvicorn running on")


def test_run_logs_no_uvicorn_info_lines(tmp_path, fresh_db, digestbot):
    from test_service import service_env, start_run, stop, wait_healthy

    port = free_port()
    proc = start_run(digestbot, service_env(tmp_path, fresh_db.url), port)
    try:
        status, _ = wait_healthy(proc, port)
        assert status == 200
    finally:
        _elapsed, _out, err = stop(proc, signal.SIGTERM)
    assert proc.returncode == 0, err
    assert "digestbot running on" in err  # our own INFO lines are there
    assert not [line for line in err.splitlines() if any(u in line for u in UVICORN_INFO)], err


def test_run_at_debug_shows_uvicorn_lines(tmp_path, fresh_db, digestbot):
    """The other side: DEBUG is where they are, as the README says."""
    from test_service import service_env, start_run, stop, wait_healthy

    port = free_port()
    proc = start_run(digestbot, service_env(tmp_path, fresh_db.url, log_level="DEBUG"), port)
    try:
        wait_healthy(proc, port)
    finally:
        _elapsed, _out, err = stop(proc, signal.SIGTERM)
    assert any(u in err for u in UVICORN_INFO), err[-2000:]


def test_poll_shows_each_error_once(polled, feed_server, digestbot):
    url = feed_server.serve("/down.xml", b"gone", status=503)
    env = polled | {"DIGESTBOT_FEED_URLS": f"{FEED_FIXTURE},{url}"}
    result = digestbot.run("poll", env=env)
    shown = result.stdout + result.stderr
    assert shown.count(url) == 1, shown
    assert "503" in result.stdout and "1 failed" in result.stdout
    verbose = digestbot.run("-v", "poll", env=env)  # -v asks for the log as well
    assert url in verbose.stderr and url in verbose.stdout


def test_feeds_add_shows_a_failing_first_poll_once(polled, feed_server, digestbot):
    """Seen: `feeds add` of a feed that fails printed the poll's log line and its own report of it."""
    url = feed_server.serve("/down-at-add.xml", b"gone", status=503)
    result = digestbot.run("feeds", "add", url, env=polled)
    shown = result.stdout + result.stderr
    assert result.returncode == 3 and "503" in shown  # added, but failing (bot.cli.exits)
    assert shown.count("503") == 1 and "WARNING" not in shown, shown
    assert "the first poll failed" in result.stderr


# --- 9. the unsubscribe page names the address, masked ----------------------------------------

def test_mask_address():
    from bot.subscriptions import mask_address

    assert mask_address("reader@example.org") == "r***@example.org"
    assert mask_address("a@x.org") == "a***@x.org"
    assert mask_address("not-an-address") == "***"


@pytest.fixture
def live_site(make_settings: Any, fresh_db: FreshDB) -> Iterator[Any]:
    from test_web import LiveServer

    from bot.web import create_app

    port = free_port()
    settings = make_settings(base_url=f"http://127.0.0.1:{port}")
    with LiveServer(create_app(settings, fresh_db.factory), port) as client:
        yield settings, client


def _status(fresh_db: FreshDB, address: str) -> str | None:
    from bot import subscribers

    with fresh_db.factory() as session:
        sub = subscribers.subscriber_by_key(session, address)
        return sub.status if sub else None


def test_the_unsubscribe_page_names_the_address_masked(live_site, fresh_db):
    from bot.tokens import Tokens

    settings, client = live_site
    [sid] = add_subscribers(fresh_db.factory, ["reader@example.org"])
    path = "/unsubscribe/" + Tokens.from_settings(settings).unsubscribe_token(sid, "reader@example.org")
    page = client.get(path)
    assert page.status_code == 200
    assert "r***@example.org" in page.text and "reader@example.org" not in page.text
    assert "点击下面的按钮，r***@example.org 将不再收到" in page.text
    assert _status(fresh_db, "reader@example.org") == "confirmed"  # a GET changes nothing
    assert run({"DIGESTBOT_DATABASE_URL": fresh_db.url}, "subscribers", "remove",
               "reader@example.org").exit_code == 0
    gone = client.get(path)  # removed since: no address to name, the page still works
    assert gone.status_code == 200 and "***" not in gone.text and "停止接收" in gone.text


def test_the_sample_link_says_what_it_is_and_unsubscribes_nobody(live_site, fresh_db):
    settings, client = live_site
    add_subscribers(fresh_db.factory, ["reader@example.org"])
    sample = sample_unsubscribe_url(settings.base_url)
    for answer in (client.get(sample), client.post(sample, content=b"List-Unsubscribe=One-Click")):
        assert answer.status_code == 200
        assert "示例链接" in answer.text and "不会让任何人退订" in answer.text
    assert _status(fresh_db, "reader@example.org") == "confirmed"


# --- 10. docker-compose.yml -----------------------------------------------------------------

def test_compose_passes_no_unread_setting_and_keeps_mailpit_local():
    from test_compose import COMPOSE, compose_cli, service_block

    text = COMPOSE.read_text(encoding="utf-8")
    assert "DIGESTBOT_DEMO_SUBSCRIBER" not in text
    mailpit = service_block(text, "mailpit")
    published = re.findall(r'^\s+- "?([^"\n]+)"?$', mailpit, re.MULTILINE)
    assert published and all(p.startswith("127.0.0.1:") for p in published), published
    import subprocess

    resolved = subprocess.run([compose_cli(), "config"], cwd=ROOT, capture_output=True,
                              text=True, timeout=60, check=True).stdout
    assert re.search(r"127\.0\.0\.1:8025:8025|host_ip: 127\.0\.0\.1", service_block(resolved, "mailpit"))
    readme = (ROOT / "docs" / "operating.md").read_text(encoding="utf-8")  # the manual's Deploy
    assert "127.0.0.1 only" in readme and "`docker-compose`" in readme


# --- 11. the phone layout, in Chromium ---------------------------------------------------

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync"]


def _chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium driven by Playwright (never `playwright install`)."""
    path = _chromium_path()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: install chromium and fonts-noto-cjk (make system-deps)")
        pytest.skip("chromium is not installed (make system-deps installs it)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[test]'")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


LONG_WORD = "Hyperparameterisationindependentreinforcementlearningbaselines"
LONG_URL = ("https://research.example.org/blog/2026/09/30/"
            "understanding-proximal-policy-optimisation-with-generalised-advantage-estimation"
            "?utm_source=feed&utm_medium=rss&utm_campaign=weekly-reinforcement-learning-digest")


def long_english_feed() -> bytes:
    """A blog's RSS in English: long titles, long paper labels (one of 80
    characters, one an unbreakable 62-character word), long URLs in the
    summaries, all in 2026-W40."""
    titles = [
        "Understanding Proximal Policy Optimization With Generalized Advantage Estimation 精读："
        "A Practical Guide",
        "Reward Shaping Considered Harmful For Long Horizon Software Engineering Agents: "
        "Lessons Learned",
        f"{LONG_WORD} × SWE-MILE: Why Everything Breaks At Scale",
        "Scaling Test Time Compute For Multi Turn Tool Use Without Any Additional Supervision × "
        "Trust Region Policy Optimization: Notes",
    ]
    items = []
    for n, title in enumerate(titles):
        summary = (f"Read the full write-up at {LONG_URL}&part={n} before trying this at home; "
                   f"the code lives at {LONG_URL.replace('blog', 'code')} and the "
                   f"{LONG_WORD}{LONG_WORD} baseline is discussed at length there.")
        items.append(
            f"<item><title>{title}</title><link>{LONG_URL}&amp;item={n}</link>"
            f"<guid>long-{n}</guid><pubDate>Wed, 30 Sep 2026 0{n}:00:00 GMT</pubDate>"
            f"<description>{summary.replace('&', '&amp;')}</description></item>")
    return ("<?xml version='1.0' encoding='utf-8'?><rss version='2.0'><channel>"
            "<title>A very long named English research blog about reinforcement learning</title>"
            f"<link>https://research.example.org/</link><description>x</description>"
            f"{''.join(items)}</channel></rss>").encode()


@pytest.fixture
def long_digest_html(fresh_db: FreshDB, make_settings: Any, feed_server: FeedServer,
                     tmp_path: Path) -> Path:
    """The email of 2026-W40 from a feed of long English titles and URLs, as
    `preview` writes it (sample unsubscribe link in place)."""
    from bot import ingest
    from bot.render import with_sample_links

    url = feed_server.serve("/blog.xml", long_english_feed(),
                            headers={"Content-Type": "application/rss+xml"})
    settings = make_settings(feed_urls=url, language="en", title="Reinforcement learning weekly")
    [result] = ingest.poll_feeds(settings, fresh_db.factory)
    assert result.status == "ok" and result.new == 4, result.summary()
    with fresh_db.factory() as session:
        data = build_digest(session, parse_week(WEEK, settings.timezone), settings)
    labels = [paper for theme in data.themes for entry in theme.entries for paper in entry.papers]
    assert max(len(label) for label in labels) == 80 and LONG_WORD in labels, labels
    path = tmp_path / "long.html"
    path.write_text(with_sample_links(render_digest(data, settings).html, settings.base_url),
                    encoding="utf-8")
    return path


def layout(browser: Any, path: Path, width: int) -> dict[str, Any]:
    """document.scrollWidth at a ``width`` px viewport, and the elements that
    stick out past its right edge."""
    page = browser.new_page(viewport={"width": width, "height": 800})
    try:
        page.goto(path.as_uri())
        return page.evaluate("""() => {
            const width = window.innerWidth;
            const wide = [];
            document.querySelectorAll('body *').forEach(e => {
                const box = e.getBoundingClientRect();
                if (box.width && box.right > width + 0.5)
                    wide.push(e.tagName + ' ' + Math.round(box.right) + ' ' +
                              (e.textContent || '').trim().slice(0, 60));
            });
            return {inner: width, scroll: document.documentElement.scrollWidth,
                    body: document.body.scrollWidth, wide: wide.slice(0, 5)};
        }""")
    finally:
        page.close()


@pytest.mark.parametrize("width", [320, 375])
def test_long_titles_labels_and_urls_fit_a_phone(browser, long_digest_html, width):
    found = layout(browser, long_digest_html, width)
    assert found["inner"] == width
    assert found["scroll"] <= width and found["body"] <= width, found
    assert not found["wide"], found


def test_the_phone_check_can_fail(browser, tmp_path):
    """Keeps the measure honest: one unbreakable line is wider than the phone."""
    page = tmp_path / "wide.html"
    page.write_text("<!DOCTYPE html><html><head><meta name='viewport' "
                    "content='width=device-width, initial-scale=1'></head><body>"
                    f"<table><tr><td style='white-space:nowrap'>{LONG_WORD * 2}</td></tr></table>"
                    "</body></html>", encoding="utf-8")
    found = layout(browser, page, 320)
    assert found["scroll"] > 320 and found["wide"]
