"""A throwaway PostgreSQL cluster for the tests.

initdb into a temporary folder, pg_ctl on a free port on 127.0.0.1, one
database per test, everything stopped and removed at the end of the session.
Only the server binaries are needed (Debian's ``postgresql``, which
scripts/install-system-deps.sh installs); a developer's own server and its data
are never touched. initdb refuses to run as root, so as root (CI containers)
the cluster runs as the ``postgres`` user that Debian's package creates.

Where PostgreSQL or psycopg is missing, ``unavailable()`` says so in one line;
conftest turns that into a skip, or into a failure when DIGESTBOT_REQUIRE_PG=1.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from helpers import free_port

# optional: the folder holding initdb and pg_ctl, if not a Debian one
BIN_ENV = "DIGESTBOT_PG_BIN"
SERVER_USER = "postgres"  # the OS user that runs the server when we are root
SUPERUSER = "postgres"  # the database superuser initdb creates
INSTALL_HINT = "sh scripts/install-system-deps.sh installs Debian's postgresql"


def find_bindir() -> Path | None:
    """The folder holding initdb and pg_ctl: $DIGESTBOT_PG_BIN if set (and only
    that), else the one on PATH, else Debian's newest /usr/lib/postgresql/<version>/bin."""
    if os.environ.get(BIN_ENV):
        explicit = Path(os.environ[BIN_ENV])
        return explicit if (explicit / "initdb").is_file() and (explicit / "pg_ctl").is_file() else None
    candidates: list[Path] = []
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).parent)

    def version(bindir: Path) -> int:
        return int(bindir.parent.name) if bindir.parent.name.isdigit() else 0

    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=version, reverse=True)
    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "pg_ctl").is_file():
            return bindir
    return None


def unavailable() -> str | None:
    """Why a cluster cannot be started here, in one line; None when it can."""
    if find_bindir() is None:
        where = f"no initdb in ${BIN_ENV}" if os.environ.get(BIN_ENV) else "PostgreSQL is not installed"
        return f"{where} ({INSTALL_HINT})"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'digestbot[postgres]')"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            return f"running as root and there is no {SERVER_USER!r} user to run initdb as"
    return None


class Cluster:
    """One PostgreSQL server of our own; ``database()`` hands out fresh databases."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="digestbot-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam(SERVER_USER)
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self.as_user = (["runuser", "-u", SERVER_USER, "--"] if shutil.which("runuser")
                            else ["su", SERVER_USER, "-s", "/bin/sh", "-c"])
        self._names = itertools.count(1)
        self._template: str | None = None
        self._watcher: subprocess.Popen[bytes] | None = None

    def _command(self, program: str, *args: str) -> list[str]:
        """A command line for one of the server's programs, as the server's user."""
        cmd = [str(self.bindir / program), *args]
        as_su = self.as_user[:1] == ["su"]  # su takes one shell command line
        return [*self.as_user, shlex.join(cmd)] if as_su else [*self.as_user, *cmd]

    def _run(self, *args: str) -> None:
        cmd = self._command(*args)
        done = subprocess.run(cmd, cwd=self.root, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{shlex.join(cmd)} failed ({done.returncode}):\n"
                               f"{done.stdout}{done.stderr}{tail}")

    def start(self) -> None:
        # C collation and UTF-8: byte order like SQLite, and the digests are Chinese
        self._run("initdb", "-D", str(self.data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8",
                  "--no-locale", "--no-sync")
        # a throwaway server: durability is not wanted, speed is
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1"
                   f" -c unix_socket_directories={shlex.quote(str(self.root))}"
                   " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
                   " -c max_connections=200")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"), "-w",
                  "-t", "60", "-o", options, "start")
        self._watch()

    def _watch(self) -> None:
        """Stop the server if this test process dies without its teardown (kill,
        a timeout): a small shell waits for our pid to go away, then cleans up."""
        stop = shlex.join(self._command("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop"))
        script = (f"while kill -0 {os.getpid()} 2>/dev/null; do sleep 1; done; "
                  f"[ -f {shlex.quote(str(self.data / 'postmaster.pid'))} ] && {stop}; "
                  f"rm -rf {shlex.quote(str(self.root))}")
        self._watcher = subprocess.Popen(["sh", "-c", script], start_new_session=True,
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)

    def stop(self) -> None:
        if self._watcher is not None:  # a normal end: we clean up ourselves
            self._watcher.kill()
            self._watcher.wait()
        try:
            if (self.data / "postmaster.pid").exists():
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def url(self, name: str) -> str:
        return f"postgresql+psycopg://{SUPERUSER}@127.0.0.1:{self.port}/{name}"

    def admin(self, sql: str) -> None:
        """Run one statement outside a transaction (CREATE/DROP DATABASE need that)."""
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user=SUPERUSER, dbname="postgres",
                             autocommit=True) as conn:
            conn.execute(sql)  # our own fixed names, never user input

    def migrated_template(self) -> str:
        """A database migrated to the newest revision once per session, to clone from."""
        if self._template is None:
            from bot import db

            name = "digestbot_migrated"
            self.admin(f"CREATE DATABASE {name}")
            engine = db.make_engine(self.url(name))
            try:
                db.upgrade(engine)
            finally:
                engine.dispose()  # a template must have no connections when cloned
            self._template = name
        return self._template

    @contextmanager
    def database(self, *, migrated: bool = False) -> Iterator[str]:
        """A new, empty (or migrated) database; its URL; dropped afterwards."""
        name = f"test_{next(self._names)}"
        template = f" TEMPLATE {self.migrated_template()}" if migrated else ""
        self.admin(f"CREATE DATABASE {name}{template}")
        try:
            yield self.url(name)
        finally:
            # FORCE: a test may leave an engine's pooled connection open
            self.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@contextmanager
def cluster() -> Iterator[Cluster]:
    """Start a cluster (call ``unavailable()`` first) and stop it afterwards."""
    bindir = find_bindir()
    assert bindir is not None
    server = Cluster(bindir)
    try:
        server.start()
        yield server
    finally:
        server.stop()
