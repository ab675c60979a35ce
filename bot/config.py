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
import difflib
import ipaddress
import logging
import math
import os
import re
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
from bot.templating import default_title, languages

ENV_PREFIX = "DIGESTBOT_"
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
WEEKDAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# DIGESTBOT_* names that are not settings but are read by the project's own
# tooling (the --config file, the Docker build, the test suite); every other
# known name comes from the fields of Settings
TOOLING_NAMES = frozenset({"CONFIG", "EXTRAS", "PUBLISH_PORT", "REQUIRE_PG", "PG_BIN", "TEST_DB"})
# the databases digestbot's schema and queries are tested on
SUPPORTED_DATABASES = ("sqlite", "postgresql")

log = logging.getLogger(__name__)


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
    # a feed that failed this many polls in a row is reported to the admin, once per streak
    feed_alert_after: int = 3
    admin_email: str | None = None  # who hears of a broken feed (and other notices to the admin)
    user_agent: str = "digestbot/0.1 (+https://github.com/digestbot/digestbot)"

    # digest
    themes_file: str | None = None
    language: str = "zh"
    summary_length: int = 180
    # entries an email shows at most (the web copy shows all): 40 keeps it
    # near 60 KB, well under the 102 KB at which Gmail clips a message
    max_entries: int = 40
    send_empty: bool = False
    title: str = "强化学习周报"

    # web and links
    base_url: str = "http://127.0.0.1:8000"
    host: str = "127.0.0.1"
    port: int = 8000
    # reverse proxies whose X-Forwarded-For names the client (addresses or networks)
    trusted_proxies: tuple[str, ...] = ("127.0.0.1", "::1")
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
    # SMTP connections a send uses at once (a relay's per-message latency
    # caps one connection at a few dozen messages a second)
    smtp_connections: int = 4
    max_hard_failures: int = 3
    outbox_dir: str = "var/outbox"

    # deliverability: DKIM signing, the bounce mailbox (see README, Deliverability)
    dkim_key_file: str | None = None
    dkim_selector: str = "digestbot"
    dkim_domain: str | None = None  # default: the From address's domain
    bounce_mailbox: str | None = None  # imaps://user:pass@host/INBOX, pop3s://..., or a Maildir path
    bounce_address: str | None = None  # envelope sender and mailto: unsubscribe; default: From
    verp: bool = False
    bounce_interval: int = 15  # minutes between reads of the bounce mailbox under `digestbot run`

    # service
    poll_interval: int = 60
    send_day: str = "mon"
    send_time: time = time(9, 0)
    send_grace_hours: int = 24

    # the editor's desk (/admin and `digestbot draft`; see README, Editor's desk)
    admin_password_hash: str | None = None  # argon2, from `digestbot admin hash-password`
    admin_password_file: str | None = None  # a file holding that hash (a Docker secret)
    admin_session_hours: int = 12  # a console login lasts this long
    require_approval: bool = False  # the scheduled send waits until the week is approved
    approval_reminder_hours: int = 24  # mail DIGESTBOT_ADMIN_EMAIL this long before an unapproved send

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


def normalise_database_url(url: str) -> str:
    """``postgresql://`` and ``postgres://`` mean psycopg 3, the driver of the
    ``postgres`` extra; SQLAlchemy would otherwise look for psycopg2."""
    for bare in ("postgresql://", "postgres://"):
        if url.startswith(bare):
            return "postgresql+psycopg://" + url.removeprefix(bare)
    return url


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
    if "database_url" in values:
        values["database_url"] = normalise_database_url(values["database_url"])
    warn_unknown_names(environ, fields)
    settings = Settings(**values)
    _validate(settings)
    if "title" not in values:  # the default title is in the edition's language
        settings = dataclasses.replace(settings, title=default_title(settings.language))
    return settings


def warn_unknown_names(environ: Mapping[str, str], fields: Mapping[str, Any]) -> list[str]:
    """Log a warning for each ``DIGESTBOT_*`` variable that names no setting
    (``DIGESTBOT_SMTP_HOTS``): it would be silently ignored. Returns them."""
    known = {env_name(name) for name in fields} | {ENV_PREFIX + name for name in TOOLING_NAMES}
    unknown = sorted(k for k in environ if k.startswith(ENV_PREFIX) and k not in known)
    for name in unknown:
        close = difflib.get_close_matches(name, sorted(known), n=1)
        log.warning("%s is not a digestbot setting and is ignored%s", name,
                    f" (did you mean {close[0]}?)" if close else " (see README.md, section Settings)")
    return unknown


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path} is not a text file (TOML must be UTF-8)",
                          hint="check that --config or DIGESTBOT_CONFIG names your settings file") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror}",
                          hint="check that --config or DIGESTBOT_CONFIG names a readable file") from None
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
            if isinstance(text, bool):
                raise ValueError
            number = float(text)
            if not math.isfinite(number):  # nan and inf pass every "> 0" check
                raise ConfigError(f"{source}: expected a finite number, got {raw!r}")
            return number
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
    dialect = s.database_url.split("://", 1)[0].split("+", 1)[0].lower()
    if dialect not in SUPPORTED_DATABASES:
        raise bad("database_url", f"{dialect}:// databases are not supported",
                  "digestbot runs on SQLite (sqlite:///path/to/file.sqlite3) or PostgreSQL "
                  "(postgresql+psycopg://user@host/db)")
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
    if s.language not in languages():
        raise bad("language", f"{s.language!r} is not supported",
                  f"use one of {', '.join(languages())} (a new language needs a message catalogue)")
    if s.send_day.lower() not in WEEKDAYS + WEEKDAY_NAMES:  # not "monkey" read as "mon"
        raise bad("send_day", f"{s.send_day!r} is not a weekday", "use mon, tue, ... sun")
    if s.smtp_security not in ("starttls", "ssl", "none"):
        raise bad("smtp_security", f"{s.smtp_security!r} is not one of starttls, ssl, none")
    if urlsplit(s.base_url).scheme not in ("http", "https") or not urlsplit(s.base_url).hostname:
        raise bad("base_url", f"{s.base_url!r} must start with http:// or https://")
    for proxy in s.trusted_proxies:
        try:
            ipaddress.ip_network(proxy, strict=False)
        except ValueError:
            raise bad("trusted_proxies", f"{proxy!r} is not an IP address or network",
                      "list addresses or networks, comma-separated: 127.0.0.1,172.16.0.0/12") from None
    if s.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise bad("log_level", f"{s.log_level!r} is not a log level", "use DEBUG, INFO, WARNING or ERROR")
    positives = {"summary_length": s.summary_length, "http_timeout": s.http_timeout,
                 "max_feed_bytes": s.max_feed_bytes, "poll_interval": s.poll_interval,
                 "smtp_timeout": s.smtp_timeout, "confirm_ttl_hours": s.confirm_ttl_hours,
                 "max_hard_failures": s.max_hard_failures, "port": s.port,
                 "send_grace_hours": s.send_grace_hours, "smtp_connections": s.smtp_connections}
    for name, value in positives.items():
        if value <= 0:
            raise bad(name, f"must be greater than 0, got {value}")
    if s.send_rate < 0:
        raise bad("send_rate", "must be 0 (no limit) or a positive number of messages per second")
    _check_ranges(s, bad)
    _check_deliverability(s, bad)
    if s.admin_email is not None and not _plain_address(s.admin_email):
        raise bad("admin_email", f"{s.admin_email!r} is not an email address",
                  "give one plain address, like ops@example.org: it is told when a feed breaks")
    if s.admin_password_hash is not None and not s.admin_password_hash.strip().startswith("$argon2"):
        raise bad("admin_password_hash", "is not an argon2 hash",
                  "set it to the output of `digestbot admin hash-password` (in single quotes in a shell)")
    if s.admin_password_hash and s.admin_password_file:
        raise bad("admin_password_file", "set only one of DIGESTBOT_ADMIN_PASSWORD_HASH and "
                  "DIGESTBOT_ADMIN_PASSWORD_FILE")


# Upper (and lower) bounds: a value outside these is a typo, and would fail
# much later (an overflowing date, a port the OS refuses, a backoff of days).
RANGES: dict[str, tuple[float, float]] = {
    "http_timeout": (0.01, 3600), "smtp_timeout": (0.01, 3600),
    "max_feed_bytes": (1, 1_000_000_000), "max_redirects": (0, 30),
    "summary_length": (1, 10_000), "max_entries": (1, 1000), "port": (1, 65535), "smtp_port": (1, 65535),
    "confirm_ttl_hours": (1, 24 * 365), "unsubscribe_ttl_days": (1, 36_500),
    "smtp_max_retries": (0, 10), "send_rate": (0, 100_000), "max_hard_failures": (1, 1000),
    "poll_interval": (1, 7 * 24 * 60), "send_grace_hours": (1, 7 * 24),
    "bounce_interval": (1, 24 * 60), "feed_alert_after": (1, 1000),
    "admin_session_hours": (1, 24 * 30), "approval_reminder_hours": (1, 7 * 24),
}


def _check_ranges(s: Settings, bad: Any) -> None:
    """Every number within its range; a number without one at least not negative."""
    types = get_type_hints(Settings)
    for f in dataclasses.fields(Settings):
        if types[f.name] not in (int, float):
            continue
        value = getattr(s, f.name)
        low, high = RANGES.get(f.name, (0, math.inf))
        if not low <= value <= high:
            span = f"from {low:g} to {high:g}" if high != math.inf else f"{low:g} or more"
            raise bad(f.name, f"must be {span}, got {value}")


DNS_NAME = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)(?:\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*$")
MAILBOX_SCHEMES = ("imaps", "imap", "pop3s", "pop3")
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _check_deliverability(s: Settings, bad: Any) -> None:
    """DKIM names are DNS names; the bounce mailbox is a URL we can read safely.

    Plain (unencrypted) IMAP and POP3 are accepted for a server on this
    machine only: a password must not cross a network in the clear.
    """
    if not DNS_NAME.match(s.dkim_selector):
        raise bad("dkim_selector", f"{s.dkim_selector!r} is not a DNS label", "use a name like digestbot or mail2026")
    if s.dkim_domain is not None and not DNS_NAME.match(s.dkim_domain):
        raise bad("dkim_domain", f"{s.dkim_domain!r} is not a domain name", "use a name like example.org")
    if s.bounce_address is not None and not re.match(r"^[^@\s<>]+@[^@\s<>]+\.[^@\s<>]+$", s.bounce_address):
        raise bad("bounce_address", f"{s.bounce_address!r} is not a plain email address",
                  "use a bare address like bounces@example.org")
    if s.bounce_mailbox:
        parts = urlsplit(s.bounce_mailbox)
        scheme = parts.scheme.lower()
        if scheme and len(scheme) > 1 and scheme not in MAILBOX_SCHEMES:
            raise bad("bounce_mailbox", f"{scheme}:// is not a mailbox we can read",
                      "use imaps://user:password@host/INBOX, pop3s://user:password@host, or a Maildir path")
        if scheme in MAILBOX_SCHEMES:
            if not parts.hostname or not parts.username:
                raise bad("bounce_mailbox", "the URL needs a user and a host",
                          "use imaps://user:password@host/INBOX (%40 for an @ in the user name)")
            if scheme in ("imap", "pop3") and parts.hostname not in LOOPBACK:
                raise bad("bounce_mailbox", f"{scheme}:// sends the password in the clear",
                          f"use {scheme}s:// (TLS, certificate checked); plain {scheme}:// is only "
                          "for a server on this machine (127.0.0.1)")


def _plain_address(value: str) -> bool:
    """One ASCII address with a local part and a domain, nothing around it."""
    local, at, domain = value.partition("@")
    return bool(at and local and "." in domain and value.isascii()
                and not any(ch.isspace() or ch in "<>,;\"" for ch in value))
