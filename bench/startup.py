"""CPU seconds a command spends before and while doing a small job (issue 35, item 1).

Each command runs as a fresh process on a migrated SQLite database with one
feed; the figure is the child's user + system CPU time (``resource``), which
a busy machine disturbs far less than wall time. Best of three runs.
Target: at most 0.6 s for `--help` and the commands that need no heavy part.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import Row

TARGET = 0.6
COMMANDS = [["--help"], ["feeds", "--help"], ["feeds", "list"], ["subscribers", "list"],
            ["dkim", "--help"]]
EXE = shutil.which("digestbot", path=str(Path(sys.executable).parent)) or "digestbot"


def cpu_seconds(args: list[str], env: dict[str, str]) -> float:
    """User + system CPU seconds of one run of ``digestbot args``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([EXE, *args], env=env, capture_output=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run() -> list[Row]:
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DIGESTBOT_")}
        env |= {"DIGESTBOT_DATABASE_URL": f"sqlite:///{tmp}/bench.sqlite3",
                "DIGESTBOT_FEED_URLS": "", "DIGESTBOT_EMBED_ENTRIES": "false"}
        subprocess.run([EXE, "db", "upgrade"], env=env, capture_output=True, check=True)
        subprocess.run([EXE, "feeds", "add", f"{tmp}/missing.xml"], env=env, capture_output=True)
        floor = min(cpu_seconds_python(env) for _ in range(3))
        orm = min(cpu_seconds_python(env, "import sqlalchemy.orm") for _ in range(3))
        rows = [Row("startup", "python -c pass (floor)", f"{floor:.2f} s", "floor", True),
                Row("startup", "import sqlalchemy.orm (floor of a database command)", f"{orm:.2f} s",
                    "floor", True)]
        for args in COMMANDS:
            seconds = min(cpu_seconds(args, env) for _ in range(3))
            rows.append(Row("startup", f"digestbot {' '.join(args)}: CPU", f"{seconds:.2f} s",
                            f"<= {TARGET} s", seconds <= TARGET))
        return rows


def cpu_seconds_python(env: dict[str, str], code: str = "pass") -> float:
    """CPU seconds of ``python -c code``: what any command pays before its own work."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], env=env, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


if __name__ == "__main__":
    for row in run():
        print(row.show())
