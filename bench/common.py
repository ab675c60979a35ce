"""Shared bits for the benchmarks: timing, a loopback HTTP server, result rows.

Each benchmark measures the bot next to its floor in the same run, because
absolute times drift on a noisy 2-core machine while ratios hold.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Row:
    """One figure: what was measured, its value, and the target it must meet."""

    bench: str
    metric: str
    value: str
    target: str
    ok: bool

    def show(self) -> str:
        mark = "ok  " if self.ok else "MISS"
        return f"{mark} {self.bench:7} {self.metric:55} {self.value:>14}   target {self.target}"


def best_of(func: Callable[[], Any], runs: int = 3) -> float:
    """Seconds of the fastest run: the least disturbed by other work on the machine."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times)


def median_of(func: Callable[[], Any], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class StaticServer:
    """Serve one body on 127.0.0.1, optionally with an ETag for conditional GET."""

    def __init__(self, body: bytes, etag: str | None = None) -> None:
        self.body, self.etag = body, etag
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                if server.etag and self.headers.get("If-None-Match") == server.etag:
                    self.send_response(304)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/rss+xml; charset=utf-8")
                self.send_header("Content-Length", str(len(server.body)))
                if server.etag:
                    self.send_header("ETag", server.etag)
                self.end_headers()
                self.wfile.write(server.body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> StaticServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}/feed.xml"


def run_standalone(run: Callable[[], list[Row]]) -> None:
    """Run one benchmark as a script: print its rows, exit 1 if a target is missed."""
    import sys

    results = run()
    for row in results:
        print(row.show())
    sys.exit(0 if all(r.ok for r in results) else 1)
