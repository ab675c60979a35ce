"""The deployment files: docker-compose.yml, Dockerfile, .dockerignore, .env.example.

No Docker engine is needed: `docker-compose config` validates the compose file
(Debian's docker-compose; skipped when it is missing, unless CI is set), and
the Docker build context is reproduced from .dockerignore and built with the
same `pip install .` the Dockerfile runs.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from bot.config import Settings, env_name

ROOT = Path(__file__).parent.parent
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
ENV_EXAMPLE = ROOT / ".env.example"
DOCKERIGNORE = ROOT / ".dockerignore"
SETTING_NAMES = {env_name(f.name) for f in dataclasses.fields(Settings)}
# build and publish knobs that compose reads from .env but digestbot does not
COMPOSE_ONLY = {"DIGESTBOT_EXTRAS", "DIGESTBOT_PUBLISH_PORT", "MAILPIT_PUBLISH_PORT"}


def compose_cli() -> str:
    exe = shutil.which("docker-compose")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("docker-compose is missing (scripts/install-system-deps.sh installs it)")
        pytest.skip("docker-compose is not installed")
    return exe


def compose_config(folder: Path, env_file: Path | None = None) -> str:
    shutil.copy(COMPOSE, folder / "docker-compose.yml")
    if env_file is not None:
        shutil.copy(env_file, folder / ".env")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DIGESTBOT_", "MAILPIT_", "COMPOSE_", "POSTGRES_", "PG"))}
    result = subprocess.run([compose_cli(), "config"], cwd=folder, env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def service_block(text: str, name: str) -> str:
    """The lines of one service in a compose file (top-level key under services:)."""
    match = re.search(rf"^  {name}:\n((?:    .*\n|\s*\n)+)", text, re.MULTILINE)
    assert match, f"no service {name!r}"
    return match.group(1)


# --- docker-compose.yml ---------------------------------------------------------------

def test_compose_file_is_valid():
    result = subprocess.run([compose_cli(), "config", "-q"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_compose_defaults_use_mailpit_and_postgresql(tmp_path):
    resolved = compose_config(tmp_path).replace("'", "").replace('"', "")  # v1 and v2 quote differently
    bot = service_block(resolved, "bot")
    for line in ("DIGESTBOT_SMTP_HOST: mailpit", "DIGESTBOT_SMTP_PORT: 1025",
                 "DIGESTBOT_SMTP_SECURITY: none",
                 "DIGESTBOT_DATABASE_URL: postgresql+psycopg://digestbot@db:5432/digestbot",
                 "PGPASSWORD: digestbot", "EXTRAS: postgres",
                 "DIGESTBOT_HOST: 0.0.0.0", "DIGESTBOT_SEND_DAY: mon",
                 "DIGESTBOT_SEND_TIME: 09:00", "DIGESTBOT_TIMEZONE: Asia/Shanghai"):
        assert line in bot, line
    assert re.search(r"digestbot-data:/data|source: digestbot-data\n\s+target: /data", bot), bot
    assert re.search(r"published: 8000|8000:8000", bot), bot
    mailpit = service_block(resolved, "mailpit")
    assert re.search(r"image: axllent/mailpit:v\d+\.\d+(\.\d+)?\n", mailpit), mailpit
    assert "8025" in mailpit
    assert re.search(r"^volumes:\n  digestbot-data:.*\n  digestbot-db:", resolved, re.MULTILINE)


def test_compose_db_is_pinned_kept_in_a_volume_and_awaited_healthy(tmp_path):
    """The bot starts once PostgreSQL answers (pg_isready), with the credentials
    the db service was created with, and the database outlives its container."""
    resolved = compose_config(tmp_path).replace("'", "").replace('"', "")
    db = service_block(resolved, "db")
    assert re.search(r"image: postgres:\d+\.\d+-bookworm\n", db), db  # a pinned minor release
    assert re.search(r"digestbot-db:/var/lib/postgresql/data|"
                     r"source: digestbot-db\n\s+target: /var/lib/postgresql/data", db), db
    health = re.search(r"healthcheck:\n((?:\s{6}.*\n)+)", db)
    assert health and "pg_isready -U digestbot -d digestbot" in health.group(1), db
    assert "ports:" not in db  # on the compose network only
    for line in ("POSTGRES_USER: digestbot", "POSTGRES_DB: digestbot",
                 "POSTGRES_PASSWORD: digestbot"):
        assert line in db, line
    bot = service_block(resolved, "bot")
    assert re.search(r"depends_on:\n\s+db:\n\s+condition: service_healthy", bot), bot
    # the password set once in .env reaches both the server and the bot's driver
    env_file = tmp_path / "pw.env"
    env_file.write_text("POSTGRES_PASSWORD=s3cret-Pw\n", encoding="utf-8")
    custom = compose_config(tmp_path, env_file)
    assert "POSTGRES_PASSWORD: s3cret-Pw" in service_block(custom, "db")
    assert "PGPASSWORD: s3cret-Pw" in service_block(custom, "bot")


def test_the_image_has_the_postgres_driver_and_sqlite_stays_possible(tmp_path):
    [extras] = [args for word, args in dockerfile_instructions() if word == "ARG"
                and args.startswith("EXTRAS")]
    assert extras == 'EXTRAS="postgres"', extras
    runs = " ".join(args for word, args in dockerfile_instructions() if word == "RUN")
    assert 'pip install ".[$EXTRAS]"' in runs
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^postgres = \["psycopg\[binary\]==[\d.]+"\]', pyproject, re.MULTILINE)
    env_file = tmp_path / "sqlite.env"
    env_file.write_text("DIGESTBOT_DATABASE_URL=sqlite:////data/digestbot.sqlite3\n", encoding="utf-8")
    bot = service_block(compose_config(tmp_path, env_file), "bot")
    assert "DIGESTBOT_DATABASE_URL: sqlite:////data/digestbot.sqlite3" in bot


def test_compose_reads_dot_env(tmp_path):
    env_file = tmp_path / "custom.env"
    env_file.write_text("DIGESTBOT_SMTP_HOST=smtp.example.org\nDIGESTBOT_SMTP_PORT=587\n"
                        "DIGESTBOT_SMTP_SECURITY=starttls\nDIGESTBOT_SEND_DAY=fri\n"
                        "DIGESTBOT_DATABASE_URL=postgresql+psycopg://bot:pw@db/digestbot\n",
                        encoding="utf-8")
    bot = service_block(compose_config(tmp_path, env_file), "bot")
    for line in ("DIGESTBOT_SMTP_HOST: smtp.example.org", "DIGESTBOT_SMTP_SECURITY: starttls",
                 "DIGESTBOT_SEND_DAY: fri",
                 "DIGESTBOT_DATABASE_URL: postgresql+psycopg://bot:pw@db/digestbot"):
        assert line in bot, line


def test_env_example_works_as_dot_env(tmp_path):
    bot = service_block(compose_config(tmp_path, ENV_EXAMPLE), "bot")
    assert "DIGESTBOT_SMTP_HOST: mailpit" in bot


def test_compose_passes_every_setting_through():
    bot = service_block(COMPOSE.read_text(encoding="utf-8"), "bot")
    passed = set(re.findall(r"^\s+(DIGESTBOT_[A-Z_]+):", bot, re.MULTILINE))
    assert passed == SETTING_NAMES, (SETTING_NAMES - passed, passed - SETTING_NAMES)


def test_env_example_names_real_settings_and_holds_no_secret():
    text = ENV_EXAMPLE.read_text(encoding="utf-8")
    names = re.findall(r"^#?\s*((?:DIGESTBOT|MAILPIT)_[A-Z_]+)=", text, re.MULTILINE)
    assert names and set(names) <= SETTING_NAMES | COMPOSE_ONLY, set(names) - SETTING_NAMES - COMPOSE_ONLY
    values = dict(re.findall(r"^((?:DIGESTBOT|MAILPIT)_[A-Z_]+)=(.*)$", text, re.MULTILINE))
    assert values["DIGESTBOT_SECRET_KEY"] == ""
    assert values.get("DIGESTBOT_SMTP_PASSWORD", "") == ""
    assert "DIGESTBOT_SECRET_KEY" in text and "secrets.token_urlsafe" in text
    assert ".env" in (ROOT / ".gitignore").read_text(encoding="utf-8").split()


# --- Dockerfile -------------------------------------------------------------------------

def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    joined = re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8"))
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_base_user_install_and_command():
    steps = dockerfile_instructions()
    [base] = [args for word, args in steps if word == "FROM"]
    assert re.fullmatch(r"python:3\.1[12]-slim", base), base
    runs = [args for word, args in steps if word == "RUN"]
    # the very install step CI exercises (tests/test_packaging.py): pip on the repository
    installs = [cmd for run in runs for cmd in re.split(r"&&|;", run) if "pip install" in cmd]
    assert shlex.split(installs[0]) == ["pip", "install", "."], installs
    assert "useradd" in " ".join(runs)
    [user] = [args for word, args in steps if word == "USER"]
    assert user not in ("root", "0")
    user_at = steps.index(("USER", user))
    cmd_at, cmd = next((i, args) for i, (word, args) in enumerate(steps) if word == "CMD")
    assert cmd_at > user_at
    argv = __import__("json").loads(cmd)
    assert argv[:2] == ["sh", "-c"]
    script = argv[2]
    assert script.index("digestbot db upgrade") < script.index("exec digestbot run --host 0.0.0.0")
    assert "8000" in dict(steps).get("EXPOSE", "")


def test_dockerfile_healthcheck_uses_python_on_healthz():
    [check] = [args for word, args in dockerfile_instructions() if word == "HEALTHCHECK"]
    assert "CMD python" in check and "/healthz" in check
    assert "curl" not in check and "wget" not in check
    command = check.split("CMD", 1)[1].strip()
    code = shlex.split(command)[2]
    compile(code, "HEALTHCHECK", "exec")  # valid Python


def test_healthcheck_command_against_a_real_server(tmp_path):
    """The HEALTHCHECK's Python exits 0 on 200 and non-zero on 503 or no server."""
    import http.server
    import threading

    [check] = [args for word, args in dockerfile_instructions() if word == "HEALTHCHECK"]
    code = shlex.split(check.split("CMD", 1)[1])[2]
    answer = {"status": 200}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            assert self.path == "/healthz"
            self.send_response(answer["status"])
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = dict(os.environ, DIGESTBOT_PORT=str(server.server_port))
    try:
        ok = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=30)
        assert ok.returncode == 0, ok.stderr
        answer["status"] = 503
        failing = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=30)
        assert failing.returncode != 0
    finally:
        server.shutdown()
        server.server_close()


# --- the Docker build context ------------------------------------------------------------

def ignored(rel: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rules, as far as this repository uses them."""
    result = False
    parts = rel.split("/")
    candidates = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    for raw in patterns:
        negate = raw.startswith("!")
        pattern = raw.lstrip("!").strip("/")
        options = {pattern, pattern.removeprefix("**/")}
        if any(fnmatch.fnmatchcase(c, p) for c in candidates for p in options):
            result = not negate
    return result


def test_the_build_context_installs_with_pip(tmp_path):
    patterns = [line.strip() for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.startswith("#")]
    assert ignored(".venv/bin/python", patterns) and ignored(".git/HEAD", patterns)
    assert ignored(".env", patterns) and not ignored(".env.example", patterns)
    assert ignored("bot/__pycache__/x.pyc", patterns) and ignored("var/digestbot.sqlite3", patterns)
    context = tmp_path / "context"
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for rel in listed:
        if (ROOT / rel).is_file() and not ignored(rel, patterns):
            (context / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, context / rel)
    assert (context / "pyproject.toml").is_file() and not (context / "tests").exists()

    wheels = tmp_path / "wheels"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w",
                            str(wheels), str(context)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    [wheel] = wheels.glob("digestbot-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "bot/data/messagedaily-rl.xml" in names
    assert "bot/migrations/env.py" in names and "bot/service.py" in names
    assert any(n.startswith("bot/templates/") for n in names)
