"""Settings from defaults, a TOML file and DIGESTBOT_* variables."""

from __future__ import annotations

from datetime import time
from pathlib import Path

import pytest

from bot.config import Settings, load_settings
from bot.errors import ConfigError


def test_defaults_work_out_of_the_box():
    s = load_settings({})
    assert s.database_url == "sqlite:///var/digestbot.sqlite3"
    assert len(s.feed_urls) == 1 and Path(s.feed_urls[0]).is_file()
    assert s.timezone == "Asia/Shanghai" and s.send_time == time(9, 0)
    assert s.var_dir == Path("var")


def test_environment_overrides_file(tmp_path):
    cfg = tmp_path / "digestbot.toml"
    cfg.write_text('feed_urls = ["https://a.org/f.xml", "/tmp/b.xml"]\n'
                   'timezone = "UTC"\nsend_time = "07:30"\nsend_rate = 5\n', encoding="utf-8")
    s = load_settings({"DIGESTBOT_TIMEZONE": "Europe/Berlin"}, cfg)
    assert s.feed_urls == ("https://a.org/f.xml", "/tmp/b.xml")
    assert s.timezone == "Europe/Berlin"
    assert s.send_time == time(7, 30) and s.send_rate == 5.0


def test_config_file_from_environment_and_section(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[digestbot]\nlanguage = "en"\nsend_empty = true\n', encoding="utf-8")
    s = load_settings({"DIGESTBOT_CONFIG": str(cfg)})
    assert s.language == "en" and s.send_empty is True


def test_comma_separated_feed_urls():
    s = load_settings({"DIGESTBOT_FEED_URLS": " https://a.org/x , ./local.xml ,"})
    assert s.feed_urls == ("https://a.org/x", "./local.xml")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DIGESTBOT_TIMEZONE": "Mars/Olympus"}, "DIGESTBOT_TIMEZONE: unknown time zone"),
        ({"DIGESTBOT_PORT": "eighty"}, "DIGESTBOT_PORT: expected a whole number"),
        ({"DIGESTBOT_SEND_EMPTY": "maybe"}, "DIGESTBOT_SEND_EMPTY: expected true or false"),
        ({"DIGESTBOT_SEND_TIME": "9h"}, "DIGESTBOT_SEND_TIME: expected a time"),
        ({"DIGESTBOT_DATABASE_URL": "digest.db"}, "DIGESTBOT_DATABASE_URL: 'digest.db' is not"),
        ({"DIGESTBOT_FEED_URLS": "ftp://x.org/f"}, "DIGESTBOT_FEED_URLS: 'ftp://x.org/f'"),
        ({"DIGESTBOT_SEND_DAY": "someday"}, "DIGESTBOT_SEND_DAY"),
        ({"DIGESTBOT_LANGUAGE": "fr"}, "DIGESTBOT_LANGUAGE"),
        ({"DIGESTBOT_POLL_INTERVAL": "0"}, "DIGESTBOT_POLL_INTERVAL: must be from 1 to 10080, got 0"),
        ({"DIGESTBOT_SMTP_SECURITY": "tls"}, "DIGESTBOT_SMTP_SECURITY"),
    ],
)
def test_bad_values_name_the_setting(env, message):
    with pytest.raises(ConfigError) as err:
        load_settings(env)
    assert message in str(err.value)


def test_bad_config_files(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings({}, tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("feed_urls = [", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings({}, bad)
    typo = tmp_path / "typo.toml"
    typo.write_text('feed_url = "x"', encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown setting 'feed_url'"):
        load_settings({}, typo)
    wrong_type = tmp_path / "type.toml"
    wrong_type.write_text('port = "x"', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"type.toml: port: expected a whole number"):
        load_settings({}, wrong_type)


def test_settings_are_immutable():
    s = load_settings({})
    with pytest.raises(AttributeError):
        s.timezone = "UTC"  # type: ignore[misc]
    assert isinstance(s, Settings)
