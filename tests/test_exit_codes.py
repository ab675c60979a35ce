"""Exit codes an operator's cron or systemd timer can act on (issue 35, item 2).

0 ok, 1 error, 2 usage, 3 "done, but some feeds failed" (``bot.cli.exits``).
The feeds are served by the real HTTP server ``feed_server``: a good feed, a
404 and an HTML page.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result
from conftest import FEED_FIXTURE

from bot.cli import cli, exits

HTML_PAGE = b"<!doctype html><html><head><title>A blog</title></head><body>Hello</body></html>"


def run(env: dict[str, str], *args: str) -> Result:
    result = CliRunner().invoke(cli, list(args), env=env)
    assert "Traceback" not in result.output, result.output
    return result


def cli_env(fresh_db, tmp_path: Path, feed_urls: str = "") -> dict[str, str]:
    return {"DIGESTBOT_DATABASE_URL": fresh_db.url, "DIGESTBOT_FEED_URLS": feed_urls,
            "DIGESTBOT_OUTBOX_DIR": str(tmp_path / "outbox")}


def test_the_codes_are_distinct_and_documented() -> None:
    codes = [exits.OK, exits.ERROR, exits.USAGE, exits.FEEDS_FAILED]
    assert codes == [0, 1, 2, 3]
    table = Path(__file__).resolve().parent.parent / "docs" / "operating-notes.md"
    text = table.read_text(encoding="utf-8")
    for code in codes:
        assert f"| {code} |" in text


def test_poll_with_a_failing_feed_exits_with_the_partial_code(fresh_db, tmp_path, feed_server):
    good = feed_server.serve("/good.xml", FEED_FIXTURE.read_bytes(),
                             headers={"Content-Type": "application/rss+xml"})
    missing = feed_server.url("/missing.xml")
    env = cli_env(fresh_db, tmp_path, f"{good},{missing}")
    result = run(env, "poll")
    assert "2 feed(s) polled, 77 new entries, 1 failed" in result.output
    assert result.exit_code == exits.FEEDS_FAILED, result.output
    again = run(env, "poll", good)  # the good one alone: all is well
    assert again.exit_code == exits.OK, again.output


def test_poll_where_every_feed_fails_is_an_error(fresh_db, tmp_path, feed_server):
    env = cli_env(fresh_db, tmp_path, f"{feed_server.url('/a.xml')},{feed_server.url('/b.xml')}")
    result = run(env, "poll")
    assert "2 feed(s) polled, 0 new entries, 2 failed" in result.output
    assert result.exit_code == exits.ERROR


def test_adding_an_unreachable_feed_is_not_silent_success(fresh_db, tmp_path, feed_server):
    env = cli_env(fresh_db, tmp_path)
    result = run(env, "feeds", "add", feed_server.url("/nothing-here.xml"))
    assert result.exit_code == exits.FEEDS_FAILED, result.output
    assert "added feed 1" in result.output
    assert "the first poll failed" in result.output
    assert "404" in result.output


def test_import_reports_each_feed_whose_first_poll_fails(fresh_db, tmp_path, feed_server):
    good = feed_server.serve("/good.xml", FEED_FIXTURE.read_bytes(),
                             headers={"Content-Type": "application/rss+xml"})
    page = feed_server.serve("/blog.html", HTML_PAGE, headers={"Content-Type": "text/html"})
    gone = feed_server.url("/gone.xml")
    opml = tmp_path / "feeds.opml"
    opml.write_text(
        '<?xml version="1.0"?><opml version="2.0"><head><title>x</title></head><body>'
        f'<outline text="Good" xmlUrl="{good}"/><outline text="Page" xmlUrl="{page}"/>'
        f'<outline text="Gone" xmlUrl="{gone}"/></body></opml>', encoding="utf-8")
    env = cli_env(fresh_db, tmp_path)
    result = run(env, "feeds", "import", str(opml))
    assert result.exit_code == exits.FEEDS_FAILED, result.output
    assert "3 added" in result.output
    assert "2 of the 3 new feeds failed their first poll" in result.output
    failing = [line for line in result.output.splitlines() if line.startswith("error")]
    assert len(failing) == 2
    assert any(page in line and "HTML page" in line for line in failing), failing
    assert any(gone in line and "404" in line for line in failing)
    assert "77 new" in result.output  # the good feed was polled too

    listed = run(env, "feeds", "list", "--format", "tsv")
    assert listed.exit_code == exits.OK
    assert len(listed.output.strip().splitlines()) == 4  # the header and all three feeds, kept


def test_a_usage_mistake_exits_2(fresh_db, tmp_path):
    result = run(cli_env(fresh_db, tmp_path), "poll", "--no-such-flag")
    assert result.exit_code == exits.USAGE
