"""Shared fixtures: real parts, on this machine.

- ``fresh_db``: a real SQLite file migrated by Alembic, with its session factory.
- ``make_settings``: Settings built the way the CLI builds them, from env-style values.
- ``feed_server``: a real HTTP server on 127.0.0.1 whose routes a test scripts.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from bot import db
from bot.config import Settings, load_settings

FIXTURES = Path(__file__).parent / "fixtures"
FEED_FIXTURE = FIXTURES / "messagedaily-rl.xml"


@dataclass
class FreshDB:
    url: str
    path: Path
    engine: Engine
    factory: sessionmaker[Session]


@pytest.fixture
def fresh_db(tmp_path: Path) -> Iterator[FreshDB]:
    path = tmp_path / "digestbot.sqlite3"
    url = f"sqlite:///{path}"
    engine = db.make_engine(url)
    db.upgrade(engine)
    yield FreshDB(url, path, engine, db.session_factory(engine))
    engine.dispose()


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


@dataclass
class Route:
    """What the server answers on one path; tests change these between polls."""

    body: bytes = b""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    honour_etag: bool = True


class FeedServer:
    """A scripted HTTP server on 127.0.0.1 that records every request."""

    def __init__(self) -> None:
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

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}{path}"

    def serve(self, path: str, body: bytes, **kwargs: Any) -> str:
        self.routes[path] = Route(body=body, **kwargs)
        return self.url(path)


@pytest.fixture
def feed_server() -> Iterator[FeedServer]:
    server = FeedServer()
    server.thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


@pytest.fixture
def feed_bytes() -> bytes:
    return FEED_FIXTURE.read_bytes()


# the real SMTP server fixture ``smtp_server`` lives in tests/smtp.py
from smtp import smtp_server  # noqa: E402,F401
