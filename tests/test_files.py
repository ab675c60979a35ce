"""Files the bot reads on the operator's word are regular files under a size
cap (issue 32, item 6): a device, a named pipe with no writer, a directory or
an oversized file is a clear error at once, never a hang or a process that
grows until the kernel kills it.

Where hanging is the risk the command runs in a real process with a timeout:
a hang fails the test instead of stalling the suite."""

from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path

import pytest
from conftest import FEED_FIXTURE
from helpers import EXE, digestbot_env

from bot import files
from bot.config import load_settings
from bot.errors import BotError, ConfigError, ThemesError
from bot.ingest.opml import OpmlError, read_opml_file
from bot.themes import load_themes

HANG = 30  # seconds a command may take before it counts as hanging


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    """A named pipe nobody writes to: a plain open() of it waits forever."""
    path = tmp_path / "pipe.csv"
    os.mkfifo(path)
    return path


@pytest.fixture
def cli_env(tmp_path: Path, fresh_db) -> dict[str, str]:
    return {"DIGESTBOT_DATABASE_URL": fresh_db.url, "DIGESTBOT_FEED_URLS": str(FEED_FIXTURE),
            "DIGESTBOT_SECRET_KEY": "test-secret-key-not-for-production",
            "DIGESTBOT_OUTBOX_DIR": str(tmp_path / "outbox")}


def run_cli(digestbot, env: dict[str, str], *args: str, stdin: bytes | None = None):
    try:
        return subprocess.run([EXE, *args], cwd=digestbot.cwd, env=digestbot_env(env),
                              input=stdin, capture_output=True, timeout=HANG)
    except subprocess.TimeoutExpired:
        pytest.fail(f"digestbot {' '.join(args)} still ran after {HANG}s")


def assert_refused(result, *words: str) -> None:
    err = result.stderr.decode()
    assert result.returncode == 1, (result.returncode, err)
    assert "Traceback" not in err and "hint:" in err, err
    for word in words:
        assert word in err, err


# --- the helper ---------------------------------------------------------------

def test_a_regular_file_is_read_whole(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"x" * 100)
    assert files.read_regular_file(path, cap=100, what="the file") == b"x" * 100


@pytest.mark.parametrize("path, kind", [("/dev/zero", "a character device"),
                                        ("/dev/null", "a character device")])
def test_a_device_is_refused(path, kind):
    with pytest.raises(BotError, match=f"is not a regular file \\(it is {kind}\\)"):
        files.read_regular_file(path, cap=1000, what="the file")


@pytest.mark.timeout(HANG)
def test_a_fifo_without_writer_is_refused_not_waited_for(fifo):
    with pytest.raises(BotError, match="a named pipe"):
        files.read_regular_file(fifo, cap=1000, what="the file")


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="a directory"):
        files.read_regular_file(tmp_path, cap=1000, what="the file", error=ConfigError)


def test_a_file_over_the_cap_is_refused(tmp_path):
    path = tmp_path / "big"
    path.write_bytes(b"x" * 1001)
    with pytest.raises(BotError, match="too large: 1,001 bytes, .* at most 1,000"):
        files.read_regular_file(path, cap=1000, what="the file")


def test_standard_input_is_read_only_where_offered_and_capped():
    assert files.read_regular_file("-", cap=5, what="x", stdin=io.BytesIO(b"12345")) == b"12345"
    with pytest.raises(BotError, match="standard input is too large: more than 5 bytes"):
        files.read_regular_file("-", cap=5, what="x", stdin=io.BytesIO(b"123456"))
    with pytest.raises(BotError, match="does not exist"):  # "-" is a file name elsewhere
        files.read_regular_file("-", cap=5, what="x")


def test_text_that_is_not_utf8_is_a_clear_error(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(BotError, match="is not UTF-8 text"):
        files.read_regular_text(path, cap=100, what="the note")


# --- every reader goes through it ---------------------------------------------

def test_config_file_must_be_a_regular_file(tmp_path, fifo):
    for path, kind in ((Path("/dev/zero"), "a character device"), (fifo, "a named pipe"),
                       (tmp_path, "a directory")):
        with pytest.raises(ConfigError, match=kind):
            load_settings({}, config_file=path)
    big = tmp_path / "big.toml"
    big.write_bytes(b"# " + b"x" * files.CONFIG_CAP + b"\n")
    with pytest.raises(ConfigError, match="too large"):
        load_settings({}, config_file=big)


def test_themes_file_must_be_a_regular_file(tmp_path, fifo):
    for path in (Path("/dev/zero"), fifo, tmp_path):
        with pytest.raises(ThemesError, match="is not a regular file") as caught:
            load_themes(path)
        assert "DIGESTBOT_THEMES_FILE" in (caught.value.hint or "")


def test_opml_file_must_be_a_regular_file(fifo):
    for path in (Path("/dev/zero"), fifo):
        with pytest.raises(OpmlError, match="is not a regular file"):
            read_opml_file(path)


@pytest.mark.parametrize("setting", ["dkim_key_file", "admin_password_file"])
def test_key_files_must_be_regular_files(make_settings, setting, fifo):
    from bot.mailer.dkim import DkimSigner
    from bot.passwords import admin_password_hash

    for path in ("/dev/zero", str(fifo)):
        with pytest.raises(ConfigError, match=f"DIGESTBOT_{setting.upper()}: .* is not a regular file"):
            if setting == "dkim_key_file":
                DkimSigner.from_file(path, "digestbot", "example.org")
            else:
                admin_password_hash(make_settings(admin_password_file=path))


def test_a_fifo_as_the_secret_key_file_is_refused(make_settings, tmp_path):
    from bot.tokens import load_secret_key

    settings = make_settings(secret_key="")  # unset: the key kept under var_dir is read
    os.mkfifo(settings.var_dir / "secret_key")
    with pytest.raises(ConfigError, match="secret key file .* a named pipe"):
        load_secret_key(settings)


# --- the commands of the issue, in a real process -----------------------------

@pytest.mark.timeout(2 * HANG)
def test_subscribers_import_refuses_dev_zero_and_a_fifo(digestbot, cli_env, fifo):
    assert_refused(run_cli(digestbot, cli_env, "subscribers", "import", "/dev/zero"),
                   "the subscriber CSV /dev/zero is not a regular file (it is a character device)")
    assert_refused(run_cli(digestbot, cli_env, "subscribers", "import", str(fifo)),
                   "a named pipe")


@pytest.mark.timeout(2 * HANG)
def test_subscribers_import_refuses_an_oversized_file_and_reads_standard_input(
        digestbot, cli_env, tmp_path, monkeypatch):
    big = tmp_path / "big.csv"
    with big.open("wb") as fh:  # sparse: over the cap without writing 100 MB
        fh.truncate(files.CSV_CAP + 1)
    assert_refused(run_cli(digestbot, cli_env, "subscribers", "import", str(big)),
                   f"at most {files.CSV_CAP:,}")
    piped = run_cli(digestbot, cli_env, "subscribers", "import", "-", "--confirmed",
                    stdin=b"email\nreader@example.org\n")
    assert piped.returncode == 0, piped.stderr.decode()
    assert "1 address(es) (1 added)" in piped.stdout.decode()


@pytest.mark.timeout(3 * HANG)
def test_preview_with_dev_zero_as_themes_file_is_a_clear_error(digestbot, cli_env):
    polled = run_cli(digestbot, cli_env, "poll")  # a week with entries: the themes are read
    assert polled.returncode == 0, polled.stderr.decode()
    result = run_cli(digestbot, {**cli_env, "DIGESTBOT_THEMES_FILE": "/dev/zero"},
                     "preview", "--format", "text")
    assert_refused(result, "themes file /dev/zero is not a regular file", "DIGESTBOT_THEMES_FILE")


@pytest.mark.timeout(2 * HANG)
def test_config_option_and_draft_note_refuse_a_fifo(digestbot, cli_env, fifo):
    assert_refused(run_cli(digestbot, cli_env, "--config", str(fifo), "status"), "a named pipe")
    assert_refused(run_cli(digestbot, cli_env, "draft", "note", "--file", str(fifo)), "a named pipe")
