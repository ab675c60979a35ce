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
from typing import Any, TypeVar, get_type_hints
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from email_validator import EmailNotValidError, validate_email

from bot.errors import ConfigError
from bot.files import CONFIG_CAP, read_regular_file

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
_Number = TypeVar("_Number", int, float)


def example_feed_path() -> str:
    """The bundled copy of the MessageDaily RL feed, used when no feed is set."""
    return str(resources.files("bot.data").joinpath("messagedaily-rl.xml"))


def bounded(default: _Number, low: float, high: float, unit: str) -> _Number:
    """A numeric setting's field, with the bounds a value must lie within
    (inclusive) and its unit, kept where the setting is declared so the
    check at start (``_check_ranges``) and docs/settings-bounds.md read the
    same numbers. A value outside them is a typo that would fail much later
    (an overflowing date, a port the OS refuses, 100,000 SMTP connections)."""
    made: _Number = field(default=default, metadata={"bounds": (low, high), "unit": unit})
    return made


@dataclass(frozen=True)
class Settings:
    """All of digestbot's settings; see README.md for what each one does."""

    database_url: str = "sqlite:///var/digestbot.sqlite3"
    feed_urls: tuple[str, ...] = field(default_factory=lambda: (example_feed_path(),))
    timezone: str = "Asia/Shanghai"
    log_level: str = "INFO"

    # fetching
    http_timeout: float = bounded(20.0, 0.01, 3600, "seconds")
    max_feed_bytes: int = bounded(10_000_000, 1, 1_000_000_000, "bytes")
    max_redirects: int = bounded(5, 0, 30, "redirects")
    # a feed that failed this many polls in a row is reported to the admin, once per streak
    feed_alert_after: int = bounded(3, 1, 1000, "failed polls")
    admin_email: str | None = None  # who hears of a broken feed (and other notices to the admin)
    user_agent: str = "digestbot/0.1 (+https://github.com/digestbot/digestbot)"
    # a feed on a private or loopback address (an RSSHub next to the bot): "allow" when the
    # operator names it, "deny" never; see docs/security-network.md
    feed_private: str = "allow"

    # digest
    themes_file: str | None = None
    language: str = "zh"
    summary_length: int = bounded(180, 1, 10_000, "characters")
    # entries an email shows at most (the web copy shows all): 40 keeps it
    # near 60 KB, well under the 102 KB at which Gmail clips a message
    max_entries: int = bounded(40, 1, 1000, "entries")
    send_empty: bool = False
    # the digest's and the site's name; empty: the first feed's own title (bot.titles)
    title: str = ""
    # the subscribe page's line under the title; empty: a neutral line in the edition's language
    tagline: str = ""

    # web and links
    base_url: str = "http://127.0.0.1:8000"
    host: str = "127.0.0.1"
    port: int = bounded(8000, 1, 65535, "TCP port")
    # reverse proxies whose X-Forwarded-For names the client (addresses or networks);
    # none by default: the connection's peer is the client
    trusted_proxies: tuple[str, ...] = ()
    secret_key: str | None = None
    confirm_ttl_hours: int = bounded(72, 1, 24 * 365, "hours")
    unsubscribe_ttl_days: int = bounded(365, 1, 36_500, "days")

    # delivery
    from_addr: str = "digestbot <digest@localhost>"
    reply_to: str | None = None
    smtp_host: str | None = None
    smtp_port: int = bounded(587, 1, 65535, "TCP port")
    smtp_user: str | None = None
    smtp_password: str | None = None
    smtp_security: str = "starttls"
    smtp_timeout: float = bounded(30.0, 0.01, 3600, "seconds")
    smtp_max_retries: int = bounded(4, 0, 10, "retries")
    send_rate: float = bounded(0.0, 0, 100_000, "messages a second (0: no limit)")
    # SMTP connections a send uses at once (a relay's per-message latency
    # caps one connection at a few dozen messages a second)
    smtp_connections: int = bounded(4, 1, 64, "connections")
    max_hard_failures: int = bounded(3, 1, 1000, "hard bounces")
    outbox_dir: str = "var/outbox"

    # deliverability: DKIM signing, the bounce mailbox (see README, Deliverability)
    dkim_key_file: str | None = None
    dkim_selector: str = "digestbot"
    dkim_domain: str | None = None  # default: the From address's domain
    bounce_mailbox: str | None = None  # imaps://user:pass@host/INBOX, pop3s://..., or a Maildir path
    bounce_address: str | None = None  # envelope sender and mailto: unsubscribe; default: From
    verp: bool = False
    # minutes between reads of the bounce mailbox under `digestbot run`
    bounce_interval: int = bounded(15, 1, 24 * 60, "minutes")

    # service
    poll_interval: int = bounded(60, 1, 7 * 24 * 60, "minutes")
    send_day: str = "mon"
    send_time: time = time(9, 0)
    send_grace_hours: int = bounded(24, 1, 7 * 24, "hours")

    # the editor's desk (/admin and `digestbot draft`; see README, Editor's desk)
    admin_password_hash: str | None = None  # argon2, from `digestbot admin hash-password`
    admin_password_file: str | None = None  # a file holding that hash (a Docker secret)
    admin_session_hours: int = bounded(12, 1, 24 * 30, "hours")  # a console login lasts this long
    require_approval: bool = False  # the scheduled send waits until the week is approved
    # mail DIGESTBOT_ADMIN_EMAIL this long before an unapproved send
    approval_reminder_hours: int = bounded(24, 1, 7 * 24, "hours")

    # the optional language-model reader (docs/llm.md): any OpenAI-compatible endpoint;
    # without a base URL and a model it is off and nothing goes on the network
    llm_base_url: str | None = None  # e.g. http://localhost:11434/v1 (Ollama)
    llm_model: str | None = None
    llm_api_key: str | None = field(default=None, repr=False)  # never logged or shown
    llm_api_key_file: str | None = None  # a file holding the key (a Docker secret)
    llm_timeout: float = bounded(60.0, 0.1, 3600, "seconds per call")
    llm_concurrency: int = bounded(2, 1, 64, "calls at once")
    # calls per UTC day at most; the rest wait for the next day
    llm_daily_calls: int = bounded(2000, 1, 10_000_000, "calls per UTC day")

    @property
    def llm_enabled(self) -> bool:
        """True when a language model is configured (``DIGESTBOT_LLM_BASE_URL`` and ``_MODEL``)."""
        return bool(self.llm_base_url and self.llm_model)

    def llm_key(self) -> str | None:
        """The model endpoint's key, from the setting or its file (read when needed, never logged)."""
        if self.llm_api_key_file:
            return Path(self.llm_api_key_file).read_text(encoding="utf-8").strip() or None
        return self.llm_api_key or None

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @property
    def var_dir(self) -> Path:
        """Where local state lives: next to a SQLite file, else ./var."""
        path = sqlite_path(self.database_url)
        return path.parent if path else Path("var")


def catalogued_languages() -> tuple[str, ...]:
    """The language codes with a message catalogue (as ``bot.templating.languages``),
    found without loading Jinja and Babel: settings load at every command's start."""
    locales = resources.files("bot").joinpath("locales")
    return tuple(sorted(entry.name for entry in locales.iterdir()
                        if entry.joinpath("LC_MESSAGES", "messages.po").is_file()))


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
    hint = "check that --config or DIGESTBOT_CONFIG names your settings file"
    raw = read_regular_file(path, cap=CONFIG_CAP, what="config file", hint=hint, error=ConfigError)
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path} is not a text file (TOML must be UTF-8)",
                          hint=hint) from None
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
    if s.language not in catalogued_languages():
        raise bad("language", f"{s.language!r} is not supported",
                  f"use one of {', '.join(catalogued_languages())} (a new language needs a message catalogue)")
    if s.send_day.lower() not in WEEKDAYS + WEEKDAY_NAMES:  # not "monkey" read as "mon"
        raise bad("send_day", f"{s.send_day!r} is not a weekday", "use mon, tue, ... sun")
    if s.smtp_security not in ("starttls", "ssl", "none"):
        raise bad("smtp_security", f"{s.smtp_security!r} is not one of starttls, ssl, none")
    if urlsplit(s.base_url).scheme not in ("http", "https") or not urlsplit(s.base_url).hostname:
        raise bad("base_url", f"{s.base_url!r} must start with http:// or https://")
    if s.feed_private not in ("allow", "deny"):
        raise bad("feed_private", f"{s.feed_private!r} is not allow or deny",
                  "allow: a private or loopback feed the operator names is fetched; deny: never")
    for proxy in s.trusted_proxies:
        try:
            ipaddress.ip_network(proxy, strict=False)
        except ValueError:
            raise bad("trusted_proxies", f"{proxy!r} is not an IP address or network",
                      "list addresses or networks, comma-separated: 127.0.0.1,172.16.0.0/12") from None
    if s.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise bad("log_level", f"{s.log_level!r} is not a log level", "use DEBUG, INFO, WARNING or ERROR")
    _check_ranges(s, bad)
    _check_deliverability(s, bad)
    _check_addresses(s, bad)
    if s.admin_password_hash is not None and not s.admin_password_hash.strip().startswith("$argon2"):
        raise bad("admin_password_hash", "is not an argon2 hash",
                  "set it to the output of `digestbot admin hash-password` (in single quotes in a shell)")
    if s.admin_password_hash and s.admin_password_file:
        raise bad("admin_password_file", "set only one of DIGESTBOT_ADMIN_PASSWORD_HASH and "
                  "DIGESTBOT_ADMIN_PASSWORD_FILE")
    _check_llm(s, bad)
    for name, limit in TEXT_LIMITS.items():
        if len(getattr(s, name)) > limit:
            raise bad(name, f"is {len(getattr(s, name))} characters long, at most {limit}",
                      "it is shown on one line: shorten it")


# the names and lines a reader sees at the top of a page or an email
TEXT_LIMITS = {"title": 200, "tagline": 300}


def _check_llm(s: Settings, bad: Any) -> None:
    """The language-model reader's settings: both or neither of the URL and the model, one key source."""
    if s.llm_base_url:
        parts = urlsplit(s.llm_base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise bad("llm_base_url", f"{s.llm_base_url!r} must start with http:// or https://",
                      "give the OpenAI-compatible endpoint, e.g. http://localhost:11434/v1 for Ollama")
        if not s.llm_model:
            raise bad("llm_model", "is not set, but DIGESTBOT_LLM_BASE_URL is",
                      "name the model to ask, e.g. qwen2.5:14b (or unset DIGESTBOT_LLM_BASE_URL)")
    elif s.llm_model:
        raise bad("llm_base_url", "is not set, but DIGESTBOT_LLM_MODEL is",
                  "give the endpoint, e.g. http://localhost:11434/v1 (or unset DIGESTBOT_LLM_MODEL)")
    if s.llm_api_key and s.llm_api_key_file:
        raise bad("llm_api_key_file", "set only one of DIGESTBOT_LLM_API_KEY and DIGESTBOT_LLM_API_KEY_FILE")
    if s.llm_api_key_file and not Path(s.llm_api_key_file).is_file():
        raise bad("llm_api_key_file", f"{s.llm_api_key_file} is not a readable file",
                  "give the path of a file that holds the key alone")


def bounds() -> dict[str, tuple[float, float, str]]:
    """Every numeric setting's (lowest, highest, unit), in declaration order."""
    return {f.name: (*f.metadata["bounds"], f.metadata["unit"])
            for f in dataclasses.fields(Settings) if "bounds" in f.metadata}


def bounds_markdown() -> str:
    """The table of docs/settings-bounds.md, made from the declarations."""
    defaults = Settings()
    rows = ["| Setting | Lowest | Highest | Default | Unit |", "|---|---|---|---|---|"]
    for name, (low, high, unit) in bounds().items():
        rows.append(f"| `{env_name(name)}` | {_number(low)} | {_number(high)} "
                    f"| {_number(getattr(defaults, name))} | {unit} |")
    return "\n".join(rows) + "\n"


def _number(value: float) -> str:
    """65535 as 65535, 1000000000 as 1,000,000,000, 0.01 as 0.01."""
    if not float(value).is_integer():
        return f"{value:g}"
    return f"{int(value):,}" if abs(value) >= 1_000_000 else str(int(value))


def _check_ranges(s: Settings, bad: Any) -> None:
    """Every numeric setting within the bounds declared with it."""
    for name, (low, high, _unit) in bounds().items():
        value = getattr(s, name)
        if not low <= value <= high:
            raise bad(name, f"must be from {_number(low)} to {_number(high)}, got {_number(value)}",
                      "see docs/settings-bounds.md for every setting's bounds")


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


# The address settings: a name with its address ("Weekly <digest@example.org>")
# where it goes into a header as it is, a bare address where it is an envelope
# sender or a recipient; and the hint each error gives.
ADDRESS_SETTINGS: dict[str, tuple[bool, str]] = {
    "from_addr": (True, "use an address, with a name if you like: 'Weekly digest <digest@example.org>'"),
    "reply_to": (True, "use an address, with a name if you like: 'Editors <editors@example.org>'"),
    "admin_email": (False, "give one plain address, like ops@example.org: it is told when a feed breaks"),
    "bounce_address": (False, "use a bare address like bounces@example.org"),
}
_NAMED = re.compile(r"^(?:(?P<name>[^<>]*?)\s*<(?P<angle>[^<>]*)>|(?P<bare>[^<>]*))$")
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


def _check_addresses(s: Settings, bad: Any) -> None:
    for name, (named, hint) in ADDRESS_SETTINGS.items():
        value = getattr(s, name)
        problem = address_problem(value, named=named) if value is not None else None
        if problem:
            raise bad(name, f"{value!r} is not {'an' if named else 'a plain'} email address: {problem}", hint)


def address_problem(value: str, *, named: bool) -> str | None:
    """Why ``value`` is not a usable address setting, or None if it is.

    The address is checked by email-validator (syntax only: no DNS at
    start, ASCII so any relay takes it); ``named`` also accepts the
    ``Name <address>`` form, whose name may be any one line of text (the
    mailer encodes it). ``localhost`` is accepted as a domain: it is the
    default, for mail written to the outbox on this machine.
    """
    if _CONTROL_CHARS.search(value):
        return "it holds a line break or another control character"
    match = _NAMED.match(value.strip())
    if match is None:
        return "it holds more than one pair of <>"
    if match["bare"] is None and not named:
        return "give the address alone, without a name or <>"
    address = (match["bare"] if match["bare"] is not None else match["angle"]).strip()
    local, _at, domain = address.rpartition("@")
    probe = f"{local}@localhost.localdomain" if domain.lower() == "localhost" else address
    try:
        validate_email(probe, check_deliverability=False, globally_deliverable=False, allow_smtputf8=False)
    except EmailNotValidError as exc:
        return str(exc)
    return None
