"""Plain helpers the tests share (the fixtures are in conftest.py).

- ``free_port``: a TCP port on 127.0.0.1 nobody listens on.
- ``wait_until``: wait on a condition instead of sleeping a fixed time.
- ``Digestbot``: the installed ``digestbot`` command run as a user runs it.
- ``any_db``: run a test on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

# a test marked with this runs twice, on SQLite and on PostgreSQL; the fixtures
# ``fresh_db``, ``db_url`` and ``make_settings`` follow (see conftest.db_backend)
BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)]
any_db = pytest.mark.parametrize("db_backend", BACKENDS, indirect=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(condition: Callable[[], object], timeout: float = 10.0, interval: float = 0.02) -> bool:
    """Poll ``condition`` until it is true; False if ``timeout`` seconds pass first.

    Use as ``assert wait_until(lambda: ...), "what did not happen"``.
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return True


EXE = shutil.which("digestbot", path=str(Path(sys.executable).parent)) or "digestbot"


def digestbot_env(env: Mapping[str, str]) -> dict[str, str]:
    """This process's environment minus any DIGESTBOT_* setting, plus ``env``."""
    return {k: v for k, v in os.environ.items() if not k.startswith("DIGESTBOT_")} | dict(env)


class Digestbot:
    """Runs the installed ``digestbot`` command in a real process, in ``cwd``.

    Processes started with ``start`` are killed at the end of the test if they
    still run, so a failed assertion does not leave a server behind.
    """

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.started: list[subprocess.Popen[str]] = []

    def run(self, *args: str, env: Mapping[str, str] | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run to the end; stdout and stderr captured as text."""
        return subprocess.run([EXE, *args], cwd=self.cwd, env=digestbot_env(env or {}),
                              capture_output=True, text=True, timeout=timeout)

    def start(self, *args: str, env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
        """Start in the background, stdout and stderr piped."""
        proc = subprocess.Popen([EXE, *args], cwd=self.cwd, env=digestbot_env(env or {}),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.started.append(proc)
        return proc

    def kill_leftovers(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
            for stream in (proc.stdout, proc.stderr):
                if stream:
                    stream.close()
