"""Every numeric setting has bounds declared with it, and address settings
are checked (issue 32, item 8): a value outside is a clear error at start
that names the setting and its bounds, never a send that opens 100,000 SMTP
connections or a From header with no address in it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import get_type_hints

import pytest
from click.testing import CliRunner

from bot.cli import cli
from bot.config import Settings, bounds, bounds_markdown, load_settings
from bot.errors import ConfigError

DOCS = Path(__file__).parent.parent / "docs" / "settings-bounds.md"
NUMERIC = [f.name for f in dataclasses.fields(Settings) if get_type_hints(Settings)[f.name] in (int, float)]


def refused(env: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_settings(env)
    return caught.value


def test_every_numeric_setting_declares_its_bounds():
    assert NUMERIC and set(bounds()) == set(NUMERIC)
    for name, (low, high, unit) in bounds().items():
        default = getattr(Settings(), name)
        assert low <= default <= high and low < high and unit, name


@pytest.mark.parametrize("name", NUMERIC)
def test_each_bound_is_inclusive_and_a_step_past_it_is_refused(name):
    low, high, _unit = bounds()[name]
    integral = get_type_hints(Settings)[name] is int
    step = 1 if integral else 0.001
    env_key = f"DIGESTBOT_{name.upper()}"
    for value in (low, high):
        text = str(int(value)) if integral else str(value)
        assert getattr(load_settings({env_key: text}), name) == value
    for value in (low - step, high + step):
        text = str(int(value)) if integral else str(value)
        error = refused({env_key: text})
        assert error.message.startswith(f"{env_key}: must be from "), error.message
        assert "docs/settings-bounds.md" in (error.hint or "")


def test_100000_smtp_connections_are_refused_naming_the_bounds():
    error = refused({"DIGESTBOT_SMTP_CONNECTIONS": "100000"})
    assert error.message == "DIGESTBOT_SMTP_CONNECTIONS: must be from 1 to 64, got 100000"


def test_the_cli_refuses_it_at_start():
    result = CliRunner().invoke(cli, ["status"], env={"DIGESTBOT_SMTP_CONNECTIONS": "100000"})
    assert result.exit_code == 1
    assert "DIGESTBOT_SMTP_CONNECTIONS: must be from 1 to 64" in result.output
    assert "hint:" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("value", ["notanaddress", "digest@", "@example.org", "a b@example.org",
                                   "a@example.org, b@example.org", "Digest <notanaddress>",
                                   "Digest\r\nBcc: evil@example.net <digest@example.org>",
                                   "Digest <a@example.org> <b@example.org>", "dïgest@example.org"])
@pytest.mark.parametrize("setting", ["from_addr", "reply_to"])
def test_a_from_or_reply_to_that_is_no_address_is_refused(setting, value):
    error = refused({f"DIGESTBOT_{setting.upper()}": value})
    assert error.message.startswith(f"DIGESTBOT_{setting.upper()}: {value!r} is not an email address")
    assert error.hint


@pytest.mark.parametrize("value", ["digest@example.org", "Weekly <digest@example.org>",
                                   '"Digest, weekly" <digest@example.org>', "强化学习周报 <digest@news.example.org>",
                                   "<digest@example.org>", "digestbot <digest@localhost>", "digest@mailhost"])
def test_the_forms_the_mailer_takes_are_accepted(value):
    assert load_settings({"DIGESTBOT_FROM_ADDR": value, "DIGESTBOT_REPLY_TO": value}).from_addr == value


@pytest.mark.parametrize("setting", ["admin_email", "bounce_address"])
def test_plain_address_settings_take_an_address_alone(setting):
    key = f"DIGESTBOT_{setting.upper()}"
    assert getattr(load_settings({key: "ops@example.org"}), setting) == "ops@example.org"
    for value in ("Ops <ops@example.org>", "notanaddress", "ops@example.org\nBcc: x@example.org"):
        assert refused({key: value}).message.startswith(f"{key}: {value!r} is not a plain email address")


def test_the_default_from_address_passes():
    assert load_settings({}).from_addr == Settings().from_addr


def test_docs_list_the_declared_bounds():
    assert bounds_markdown() in DOCS.read_text(encoding="utf-8"), \
        "docs/settings-bounds.md is behind bot/config.py: paste bounds_markdown() into it"
