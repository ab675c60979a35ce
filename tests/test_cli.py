"""The `digestbot` command as a user runs it: a real process, from any folder."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner
from conftest import FEED_FIXTURE

from bot.cli import cli


def test_upgrade_and_poll_from_any_folder(tmp_path, digestbot):
    env = {"DIGESTBOT_DATABASE_URL": f"sqlite:///{tmp_path / 'x.sqlite3'}",
           "DIGESTBOT_FEED_URLS": str(FEED_FIXTURE)}
    up = digestbot.run("db", "upgrade", env=env)
    assert up.returncode == 0, up.stderr
    first = digestbot.run("poll", env=env)
    assert first.returncode == 0, first.stderr
    assert "77 new" in first.stdout
    second = digestbot.run("poll", env=env)
    assert "0 new entries" in second.stdout


def test_default_database_lives_under_var(tmp_path, digestbot):
    up = digestbot.run("db", "upgrade", env={})
    assert up.returncode == 0, up.stderr
    assert (tmp_path / "var" / "digestbot.sqlite3").is_file()
    polled = digestbot.run("poll", env={})
    assert "77 new" in polled.stdout


def test_unmigrated_database_gives_message_not_traceback(tmp_path, digestbot):
    env = {"DIGESTBOT_DATABASE_URL": f"sqlite:///{tmp_path / 'x.sqlite3'}"}
    result = digestbot.run("poll", env=env)
    assert result.returncode == 1
    assert "no digestbot schema" in result.stderr and "digestbot db upgrade" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_database_folder_that_cannot_be_made_gives_message_not_traceback(tmp_path, digestbot):
    """Seen: `db upgrade` with a SQLite path under a folder it cannot create ended in a traceback."""
    blocker = tmp_path / "a file"
    blocker.write_text("not a folder", encoding="utf-8")
    env = {"DIGESTBOT_DATABASE_URL": f"sqlite:///{blocker / 'var' / 'db.sqlite3'}"}
    result = digestbot.run("db", "upgrade", env=env)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"cannot create the folder of the SQLite database {blocker / 'var' / 'db.sqlite3'}" in result.stderr
    assert "DIGESTBOT_DATABASE_URL" in result.stderr


def test_bad_setting_fails_at_start_naming_it(tmp_path, digestbot):
    result = digestbot.run("poll", env={"DIGESTBOT_HTTP_TIMEOUT": "soon"})
    assert result.returncode == 1
    assert "DIGESTBOT_HTTP_TIMEOUT: expected a number, got 'soon'" in result.stderr


def test_config_flag(tmp_path, fresh_db):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'database_url = "{fresh_db.url}"\nfeed_urls = ["{FEED_FIXTURE}"]\n',
                   encoding="utf-8")
    result = CliRunner().invoke(cli, ["--config", str(cfg), "poll"])
    assert result.exit_code == 0, result.output
    assert "77 new" in result.output
    table = CliRunner().invoke(cli, ["--config", str(cfg), "feeds"])
    assert "强化学习 on" in table.output and "77" in table.output


def test_poll_exits_nonzero_when_every_feed_fails(tmp_path, fresh_db):
    env = {"DIGESTBOT_DATABASE_URL": fresh_db.url,
           "DIGESTBOT_FEED_URLS": str(tmp_path / "missing.xml")}
    result = CliRunner().invoke(cli, ["poll"], env=env)
    assert result.exit_code == 1
    assert "cannot read the file" in result.output
    table = CliRunner().invoke(cli, ["feeds", "--format", "json"], env=env)
    [feed] = json.loads(table.output)
    assert feed["consecutive_failures"] == 1 and "cannot read the file" in feed["last_error"]
    assert feed["last_success_at"] is None


def walk(group: click.Group, prefix: str = ""):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # the top level loads its commands lazily
        command = group.get_command(ctx, name)
        assert command is not None, name
        yield prefix + name, command
        if isinstance(command, click.Group):
            yield from walk(command, prefix + name + " ")


@pytest.mark.parametrize("name", [name for name, _ in walk(cli)])
def test_every_command_has_help(name):
    command = dict(walk(cli))[name]
    assert command.help and len(command.help.strip()) > 10, f"`digestbot {name}` has no help text"
    result = CliRunner().invoke(cli, [*name.split(), "--help"])
    assert result.exit_code == 0
