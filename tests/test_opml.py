"""OPML in and out (issue 11), through the CLI on real migrated databases:
what we export imports again, other readers' files import, hostile files are
refused with a message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot import db
from bot.cli import cli
from bot.ingest import opml

OTHER_READER = b"""<?xml version="1.0" encoding="UTF-8"?>
<opml version="1.0">
  <head><title>Subscriptions in another reader</title></head>
  <body>
    <outline text="Research" title="Research">
      <outline type="rss" text="Distill" title="Distill" xmlUrl="https://distill.pub/rss.xml"
               htmlUrl="https://distill.pub"/>
      <outline text="Labs">
        <outline type="rss" xmlUrl="HTTPS://Lab.Example.org:443/feed/" />
        <outline type="rss" text="Lab again" xmlUrl="https://lab.example.org/feed#latest"/>
      </outline>
    </outline>
    <outline text="Untitled" xmlUrl="http://blog.example.net/atom.xml"/>
    <outline text="A folder with nothing in it"/>
    <outline text="Not a feed" type="link" url="https://example.org/"/>
  </body>
</opml>
"""


def run(env: dict[str, str], *args: str):
    result = CliRunner().invoke(cli, list(args), env=env)
    assert "Traceback" not in result.output, result.output
    return result


def feeds(env: dict[str, str]) -> list[tuple[str, str]]:
    listed = run(env, "feeds", "list", "--format", "json")
    assert listed.exit_code == 0, listed.output
    return [(row["url"], row["name"]) for row in json.loads(listed.output)]


@pytest.fixture
def env(fresh_db) -> dict[str, str]:
    return {"DIGESTBOT_DATABASE_URL": fresh_db.url}


@pytest.fixture
def empty_env(tmp_path: Path) -> dict[str, str]:
    """A second database, migrated and empty."""
    url = f"sqlite:///{tmp_path / 'second.sqlite3'}"
    engine = db.make_engine(url)
    db.upgrade(engine)
    engine.dispose()
    return {"DIGESTBOT_DATABASE_URL": url}


def test_export_then_import_gives_the_same_feeds(env, empty_env, tmp_path, feed_server):
    local = tmp_path / "local feed.xml"
    local.write_text("<rss/>", encoding="utf-8")
    served = feed_server.serve("/a.xml", b'<rss version="2.0"><channel><title>A</title></channel></rss>')
    unreachable = feed_server.url("/gone.xml")  # adding polls once; a failure keeps it added
    for args in ([served, "--name", "Feed «A» & co"], [str(local)],
                 [unreachable, "--name", "Paused one"]):
        # added all three; the unreachable one with the "feeds failed" code (bot.cli.exits)
        assert run(env, "feeds", "add", *args).exit_code == (3 if unreachable in args else 0)
    assert run(env, "feeds", "pause", unreachable).exit_code == 0
    exported = tmp_path / "feeds.opml"
    result = run(env, "feeds", "export", "--out", str(exported))
    assert result.exit_code == 0 and "3 feed(s) written" in result.output
    assert exported.read_bytes().startswith(b"<?xml version='1.0' encoding='utf-8'?>\n<opml version=\"2.0\">")
    assert local.as_uri().encode() in exported.read_bytes()  # a path is written as a file:// URL

    imported = run(empty_env, "feeds", "import", str(exported))
    assert imported.exit_code == 3, imported.output  # the unreachable one failed its first poll
    # a local path in an OPML file is refused (issue 32): only the operator names local files
    assert "is a local file path, refused here" in imported.output
    assert "1 of the 2 new feeds failed their first poll" in imported.output
    assert "2 added, 0 restored, 0 already there, 1 skipped" in imported.output
    assert feeds(empty_env) == [row for row in feeds(env) if row[0] != str(local.resolve())]
    assert [name for _, name in feeds(empty_env)][0] == "Feed «A» & co"
    again = run(empty_env, "feeds", "import", str(exported))
    assert "0 added, 0 restored, 2 already there, 1 skipped" in again.output
    assert len(feeds(empty_env)) == 2

    to_stdout = run(env, "feeds", "export")
    assert opml.read_opml(to_stdout.stdout_bytes) == opml.read_opml(exported.read_bytes())


def test_a_file_from_another_reader_imports(env, tmp_path):
    path = tmp_path / "subscriptions.xml"
    path.write_bytes(OTHER_READER)
    result = run(env, "feeds", "import", "--no-poll", str(path))  # loopback only: not polled
    assert result.exit_code == 0, result.output
    # the two spellings of the lab's feed are one feed
    assert "4 feed(s) in subscriptions.xml: 3 added, 0 restored, 1 already there" in result.output
    assert feeds(env) == [("https://distill.pub/rss.xml", "Distill"),
                          ("https://lab.example.org/feed", "https://lab.example.org/feed"),
                          ("http://blog.example.net/atom.xml", "Untitled")]
    listed = opml.read_opml(OTHER_READER)
    assert [(f.name, f.category) for f in listed] == [
        ("Distill", "Research"), (None, "Labs"), ("Lab again", "Labs"), ("Untitled", None)]


BOMB = b"""<?xml version="1.0"?>
<!DOCTYPE opml [
  <!ENTITY a "aaaaaaaaaa">
  <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
  <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
  <!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">
]>
<opml version="2.0"><body><outline text="&d;" xmlUrl="https://bomb.example/feed"/></body></opml>
"""
EXTERNAL = b"""<?xml version="1.0"?>
<!DOCTYPE opml [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<opml version="2.0"><body><outline text="&secret;" xmlUrl="https://xxe.example/feed"/></body></opml>
"""


@pytest.mark.parametrize(("content", "message"), [
    (BOMB, "refused: the file declares entities"),
    (EXTERNAL, "refused: the file declares entities"),
    (b"<opml><body><outline xmlUrl='https://x.example/f'></body>", "not well-formed XML"),
    (b"<rss version='2.0'><channel/></rss>", "not an OPML file (its root element is <rss>)"),
    (b"<opml version='2.0'><head/></opml>", "has no <body>"),
])
def test_hostile_or_broken_files_are_refused(env, tmp_path, content, message):
    path = tmp_path / "bad.opml"
    path.write_bytes(content)
    result = run(env, "feeds", "import", str(path))
    assert result.exit_code == 1
    assert message in result.output and "hint:" in result.output
    assert feeds(env) == []


def test_a_50_mb_file_is_refused_before_it_is_read(env, tmp_path):
    path = tmp_path / "huge.opml"
    with path.open("wb") as fh:
        fh.truncate(50 * 1024 * 1024)  # sparse: 50 MB on paper, nothing written
    result = run(env, "feeds", "import", str(path))
    assert result.exit_code == 1
    assert "is too large: 52,428,800 bytes" in result.output
    assert feeds(env) == []


def test_a_missing_file(env, tmp_path):
    result = run(env, "feeds", "import", str(tmp_path / "nope.opml"))
    assert result.exit_code == 1 and "does not exist" in result.output


def test_export_to_a_folder_that_is_not_there_says_so(env, tmp_path):
    """Seen: `feeds export --out` into a missing folder ended in a FileNotFoundError traceback."""
    out = tmp_path / "no such folder" / "feeds.opml"
    result = run(env, "feeds", "export", "--out", str(out))
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.exception
    assert f"cannot write {out}" in result.output and "--out" in result.output
    assert not out.parent.exists()

