"""Settings: one frozen object, built once at start and passed down.

Every setting can come from a ``DIGESTBOT_<NAME>`` environment variable or
from a TOML file (``--config FILE`` or ``DIGESTBOT_CONFIG``), where the key is
the lower-case name (``feed_urls = [...]``). The environment wins over the
file, the file over the defaults. The defaults run the bot out of the box: a
SQLite file under ``./var/``, the bundled example feed, mail written to a
local outbox.

A value we cannot use fails at start with a message naming the setting, so a
typo never surfaces as a stack trace three weeks later at send time.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import time
from importlib import resources
from pathlib import Path
from typing import Any, get_type_hints
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bot.errors import ConfigError

ENV_PREFIX = "DIGESTBOT_"
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def example_feed_path() -> str:
    """The bundled copy of the MessageDaily RL feed, used when no feed is set."""
    return str(resources.files("bot.data").joinpath("messagedaily-rl.xml"))


@dataclass(frozen=True)
class Settings:
    """All of digestbot's settings; see README.md for what each one does."""

    database_url: str = "sqlite:///var/digestbot.sqlite3"
    feed_urls: tuple[str, ...] = field(default_factory=lambda: (example_feed_path(),))
    timezone: str = "Asia/Shanghai"
    log_level: str = "INFO"

    # fetching
    http_timeout: float = 20.0
    max_feed_bytes: int = 10_000_000
    max_redirects: int = 5
    user_agent: str = "digestbot/0.1 (+https://github.com/digestbot/digestbot)"

    # digest
    themes_file: str | None = None
    language: str = "zh"
    summary_length: int = 180
    send_empty: bool = False
    title: str = "强化学习周报"

    # web and links
    base_url: str = "http://127.0.0.1:8000"
    host: str = "127.0.0.1"
    port: int = 8000
    secret_key: str | None = None
    confirm_ttl_hours: int = 72
    unsubscribe_ttl_days: int = 365

    # delivery
    from_addr: str = "digestbot <digest@localhost>"
    reply_to: str | None = None
    smtp_host: str | None = None
    smtp_port: int = 587
    smtp_user: str | None = None
    smtp_password: str | None = None
    smtp_security: str = "starttls"
    smtp_timeout: float = 30.0
    smtp_max_retries: int = 4
    send_rate: float = 0.0
    max_hard_failures: int = 3
    outbox_dir: str = "var/outbox"
    demo_subscriber: str | None = None

    # service
    poll_interval: int = 60
    send_day: str = "mon"
    send_time: time = time(9, 0)
    send_grace_hours: int = 24

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @property
    def var_dir(self) -> Path:
        """Where local state lives: next to a SQLite file, else ./var."""
        path = sqlite_path(self.database_url)
        return path.parent if path else Path("var")


def sqlite_path(url: str) -> Path | None:
    """The file behind a ``sqlite:///`` URL, or None for other databases."""
    if not url.startswith("sqlite:///") or url in ("sqlite://", "sqlite:///:memory:"):
        return None
    return Path(url.removeprefix("sqlite:///"))


def env_name(name: str) -> str:
    return ENV_PREFIX + name.upper()


def load_settings(
    environ: Mapping[str, str] | None = None, config_file: str | Path | None = None
) -> Settings:
    """Build Settings from defaults, then the TOML file, then the environment."""
    environ = os.environ if environ is None else environ
    config_file = config_file or environ.get(ENV_PREFIX + "CONFIG") or None
    values: dict[str, Any] = {}
    fields = {f.name: f for f in dataclasses.fields(Settings)}
    types = get_type_hints(Settings)
    if config_file:
        for key, raw in _read_toml(Path(config_file)).items():
            if key not in fields:
                raise ConfigError(
                    f"{config_file}: unknown setting {key!r}",
                    hint="see README.md, section Settings, for the names",
                )
            values[key] = _coerce(key, raw, types[key], source=f"{config_file}: {key}")
    for name in fields:
        raw = environ.get(env_name(name))
        if raw is not None and raw != "":
            values[name] = _coerce(name, raw, types[name], source=env_name(name))
    settings = Settings(**values)
    _validate(settings)
    return settings


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    # allow both a flat file and one with a [digestbot] table
    section = data.get("digestbot", data)
    if not isinstance(section, dict):
        raise ConfigError(f"config file {path}: [digestbot] must be a table")
    return section


def _coerce(name: str, raw: Any, typ: Any, source: str) -> Any:
    """Turn a raw env string or TOML value into the setting's type."""
    text = raw.strip() if isinstance(raw, str) else raw
    try:
        if typ == tuple[str, ...]:
            items = text.split(",") if isinstance(text, str) else list(text)
            return tuple(str(i).strip() for i in items if str(i).strip())
        if typ is bool:
            return _to_bool(text)
        if typ is int:
            if isinstance(text, bool):
                raise ValueError
            return int(text)
        if typ is float:
            return float(text)
        if typ is time:
            return text if isinstance(text, time) else time.fromisoformat(str(text))
        return str(text)
    except (ValueError, TypeError):
        want = {int: "a whole number", float: "a number", bool: "true or false",
                time: "a time like 09:00"}.get(typ, "a value")
        raise ConfigError(f"{source}: expected {want}, got {raw!r}") from None


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    lowered = str(value).lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(value)


def _validate(s: Settings) -> None:
    """Check values that are the right type but still unusable."""
    def bad(name: str, problem: str, hint: str | None = None) -> ConfigError:
        return ConfigError(f"{env_name(name)}: {problem}", hint=hint)

    if "://" not in s.database_url:
        raise bad("database_url", f"{s.database_url!r} is not a database URL",
                  "use sqlite:///path/to/file.sqlite3 or postgresql+psycopg://user@host/db")
    if not s.feed_urls:
        raise bad("feed_urls", "no feed given", "set one or more URLs or file paths, comma-separated")
    for url in s.feed_urls:
        scheme = urlsplit(url).scheme
        if scheme not in ("http", "https", "file", "") and len(scheme) > 1:
            raise bad("feed_urls", f"{url!r} is neither an http(s) URL nor a file path")
    try:
        ZoneInfo(s.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise bad("timezone", f"unknown time zone {s.timezone!r}", "use a name like Asia/Shanghai or UTC") from None
    if s.language not in ("zh", "en"):
        raise bad("language", f"{s.language!r} is not supported", "use zh or en")
    if s.send_day.lower()[:3] not in WEEKDAYS:
        raise bad("send_day", f"{s.send_day!r} is not a weekday", "use mon, tue, ... sun")
    if s.smtp_security not in ("starttls", "ssl", "none"):
        raise bad("smtp_security", f"{s.smtp_security!r} is not one of starttls, ssl, none")
    if urlsplit(s.base_url).scheme not in ("http", "https"):
        raise bad("base_url", f"{s.base_url!r} must start with http:// or https://")
    if s.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise bad("log_level", f"{s.log_level!r} is not a log level", "use DEBUG, INFO, WARNING or ERROR")
    positives = {"summary_length": s.summary_length, "http_timeout": s.http_timeout,
                 "max_feed_bytes": s.max_feed_bytes, "poll_interval": s.poll_interval,
                 "smtp_timeout": s.smtp_timeout, "confirm_ttl_hours": s.confirm_ttl_hours,
                 "max_hard_failures": s.max_hard_failures, "port": s.port,
                 "send_grace_hours": s.send_grace_hours}
    for name, value in positives.items():
        if value <= 0:
            raise bad(name, f"must be greater than 0, got {value}")
    if s.send_rate < 0:
        raise bad("send_rate", "must be 0 (no limit) or a positive number of messages per second")
