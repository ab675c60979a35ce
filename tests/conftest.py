"""Shared fixtures: real parts, on this machine.

- ``fresh_db``: a real database migrated by Alembic, with its session factory;
  SQLite, or PostgreSQL for tests marked ``helpers.any_db``.
- ``db_url``: an empty database on the same backend, for tests of migrations.
- ``pg_cluster``: a throwaway PostgreSQL server for the session (tests/pg.py).
- ``make_settings``: Settings built the way the CLI builds them, from env-style values.
- ``settings`` / ``smtp_settings``: the settings most tests want, mailing to the
  outbox / to the real SMTP server ``smtp_server`` (tests/smtp.py).
- ``digestbot``: the installed command in a real process (helpers.Digestbot).
- ``feed_server``: a real HTTP server on 127.0.0.1 whose routes a test scripts.
- ``loopback_only`` (every test): fails a test that tried to connect outside
  127.0.0.0/8 and ::1 (``OffLoopback``).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pg
import pytest
from helpers import Digestbot
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from bot import db
from bot.config import Settings, load_settings

if TYPE_CHECKING:
    from smtp import SmtpServer

FIXTURES = Path(__file__).parent / "fixtures"
FEED_FIXTURE = FIXTURES / "messagedaily-rl.xml"
BASE_URL = "https://digest.example.org"
FROM_ADDR = "强化学习周报 <digest@news.example.org>"
REPLY_TO = "editor@example.org"

pytest_plugins = ["smtp"]  # the real SMTP server fixture ``smtp_server``

# --- databases ----------------------------------------------------------------------------

def _require_pg() -> bool:
    """Must the PostgreSQL tests run here (fail rather than skip)? In CI, and where
    `make test` says so (DIGESTBOT_REQUIRE_PG=1: it could install PostgreSQL)."""
    explicit = os.environ.get("DIGESTBOT_REQUIRE_PG")
    if explicit is not None:
        return explicit == "1"
    return os.environ.get("CI", "") not in ("", "0", "false")


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[pg.Cluster]:
    """A PostgreSQL server of our own for the session, started on first use."""
    problem = pg.unavailable()
    if problem:
        if _require_pg():
            pytest.fail(f"{problem}; DIGESTBOT_REQUIRE_PG=1 (or CI) forbids skipping the "
                        "PostgreSQL tests", pytrace=False)
        pytest.skip(problem)
    with pg.cluster() as cluster:
        yield cluster


@pytest.fixture
def db_backend(request: pytest.FixtureRequest) -> str:
    """What ``helpers.any_db`` parametrises the test with; else $DIGESTBOT_TEST_DB or "sqlite".

    DIGESTBOT_TEST_DB=postgresql runs every database test on PostgreSQL.
    """
    default = os.environ.get("DIGESTBOT_TEST_DB") or "sqlite"
    return str(getattr(request, "param", default))


@pytest.fixture
def db_url(request: pytest.FixtureRequest, db_backend: str, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty database (no schema) on the test's backend."""
    if db_backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.sqlite3'}"
        return
    cluster: pg.Cluster = request.getfixturevalue("pg_cluster")
    with cluster.database() as url:
        yield url


@dataclass
class FreshDB:
    url: str
    path: Path | None  # the SQLite file; None on PostgreSQL
    engine: Engine
    factory: sessionmaker[Session]


@pytest.fixture
def fresh_db(request: pytest.FixtureRequest, db_backend: str, tmp_path: Path) -> Iterator[FreshDB]:
    """A database at the newest migration, on the test's backend.

    SQLite runs every migration per test; PostgreSQL clones a database the
    session migrated once (CREATE DATABASE ... TEMPLATE), which is much faster.
    """
    with contextlib.ExitStack() as stack:
        if db_backend == "sqlite":
            path: Path | None = tmp_path / "digestbot.sqlite3"
            url = f"sqlite:///{path}"
        else:
            cluster: pg.Cluster = request.getfixturevalue("pg_cluster")
            path, url = None, stack.enter_context(cluster.database(migrated=True))
        engine = db.make_engine(url)
        stack.callback(engine.dispose)
        if db_backend == "sqlite":
            db.upgrade(engine)
        yield FreshDB(url, path, engine, db.session_factory(engine))


# --- settings -----------------------------------------------------------------------------

@pytest.fixture
def make_settings(tmp_path: Path, fresh_db: FreshDB) -> Callable[..., Settings]:
    """Settings on the fresh database; keyword args are setting names -> env values."""
    def build(**values: Any) -> Settings:
        env = {
            "DIGESTBOT_DATABASE_URL": fresh_db.url,
            "DIGESTBOT_FEED_URLS": str(FEED_FIXTURE),
            "DIGESTBOT_OUTBOX_DIR": str(tmp_path / "outbox"),
            "DIGESTBOT_SECRET_KEY": "test-secret-key-not-for-production",
            "DIGESTBOT_HTTP_TIMEOUT": "2",
        }
        env.update({f"DIGESTBOT_{k.upper()}": str(v) for k, v in values.items()})
        return load_settings(env)
    return build


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    """The settings most tests want: a public base URL and a sender; mail goes to the outbox."""
    return make_settings(base_url=BASE_URL, from_addr=FROM_ADDR, reply_to=REPLY_TO)


@pytest.fixture
def smtp_settings(make_settings: Callable[..., Settings], smtp_server: SmtpServer) -> Settings:
    """The same settings, mailing to the real SMTP server ``smtp_server``."""
    return make_settings(base_url=BASE_URL, from_addr=FROM_ADDR, reply_to=REPLY_TO,
                         **smtp_server.settings_env())


# --- processes and servers ----------------------------------------------------------------

@pytest.fixture
def digestbot(tmp_path: Path) -> Iterator[Digestbot]:
    """The installed ``digestbot`` command, run in tmp_path; leftovers killed afterwards."""
    runner = Digestbot(tmp_path)
    try:
        yield runner
    finally:
        runner.kill_leftovers()


@dataclass
class Route:
    """What the server answers on one path; tests change these between polls."""

    body: bytes = b""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    honour_etag: bool = True


class FeedServer:
    """A scripted HTTP server on 127.0.0.1 (or another loopback ``host``) that
    records every request."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.routes: dict[str, Route] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                server.requests.append((self.path, dict(self.headers)))
                route = server.routes.get(self.path)
                if route is None:
                    self.send_error(404)
                    return
                if route.delay:
                    threading.Event().wait(route.delay)
                etag = route.headers.get("ETag")
                if route.honour_etag and etag and self.headers.get("If-None-Match") == etag:
                    self.send_response(304)
                    self.end_headers()
                    return
                self.send_response(route.status)
                for name, value in route.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(route.body)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(route.body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        self.httpd.daemon_threads = True
        # shutdown() waits for the loop's next look at its stop flag: every 10 ms,
        # not serve_forever's default 0.5 s that every test using this server paid
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01},
                                       daemon=True)

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.httpd.server_port}{path}"

    def serve(self, path: str, body: bytes, **kwargs: Any) -> str:
        self.routes[path] = Route(body=body, **kwargs)
        return self.url(path)


@contextlib.contextmanager
def serving(host: str = "127.0.0.1") -> Iterator[FeedServer]:
    """A running ``FeedServer`` on ``host``, shut down afterwards."""
    server = FeedServer(host)
    server.thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()


@pytest.fixture
def feed_server() -> Iterator[FeedServer]:
    with serving() as server:
        yield server


@pytest.fixture
def feed_bytes() -> bytes:
    return FEED_FIXTURE.read_bytes()


# --- loopback only ------------------------------------------------------------------------

class OffLoopback:
    """Every attempt of this process to open a connection (or send a datagram)
    to an address outside 127.0.0.0/8 and ::1. The attempt itself is refused
    (OSError) and ``loopback_only`` fails the test that made it, even when the
    code under test caught the error.

    Host names count as outside, ``localhost`` apart: resolving a name in
    ``connect`` would already ask a DNS server. AF_UNIX sockets are allowed.
    Child processes (``digestbot`` run as a command) are not watched."""

    def __init__(self) -> None:
        self.attempts: list[str] = []

    def check(self, sock: socket.socket, address: Any) -> None:
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            return
        host = address[0] if isinstance(address, tuple) and address else address
        if _is_loopback(host):
            return
        self.attempts.append(f"{host!r} (port {address[1] if isinstance(address, tuple) else '?'})")
        raise PermissionError(f"the test suite talks to loopback only, not to {host!r}")


def _is_loopback(host: Any) -> bool:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


OFF_LOOPBACK = OffLoopback()


def _guard_sockets() -> None:
    """Wrap the socket methods every client path goes through (create_connection,
    asyncio's sock_connect and uvicorn's, smtplib, httpx via anyio all end in
    ``socket.connect``)."""
    original_connect = socket.socket.connect
    original_connect_ex = socket.socket.connect_ex
    original_sendto = socket.socket.sendto

    def connect(self: socket.socket, address: Any) -> None:
        OFF_LOOPBACK.check(self, address)
        original_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        OFF_LOOPBACK.check(self, address)
        return original_connect_ex(self, address)

    def sendto(self: socket.socket, data: Any, *args: Any) -> int:
        OFF_LOOPBACK.check(self, args[-1])
        return original_sendto(self, data, *args)  # type: ignore[arg-type]

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
    socket.socket.sendto = sendto  # type: ignore[method-assign,assignment]


_guard_sockets()


@pytest.fixture(autouse=True)
def loopback_only() -> Iterator[OffLoopback]:
    """Fail any test whose code tried to reach an address outside loopback."""
    before = len(OFF_LOOPBACK.attempts)
    yield OFF_LOOPBACK
    tried = OFF_LOOPBACK.attempts[before:]
    if tried:
        pytest.fail("the test tried to connect outside loopback: " + ", ".join(tried), pytrace=False)
