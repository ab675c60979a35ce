"""A plain (non-editable) install carries templates, migrations and data files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_wheel_ships_everything_it_needs(tmp_path):
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(wheels), str(ROOT)],
        capture_output=True, text=True, timeout=300,
    )
    assert build.returncode == 0, build.stderr
    [wheel] = wheels.glob("digestbot-*.whl")
    target = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(target),
         str(wheel)], capture_output=True, text=True, timeout=300,
    )
    assert install.returncode == 0, install.stderr

    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIGESTBOT_")}
    env["PYTHONPATH"] = str(target)
    script = (
        "import bot, sys\n"
        f"assert bot.__file__.startswith({str(target)!r}), bot.__file__\n"
        "from bot.cli import main\n"
        "sys.argv = ['digestbot'] + sys.argv[1:]\n"
        "main()\n"
    )
    for args in (["db", "upgrade"], ["poll"]):
        run = subprocess.run([sys.executable, "-c", script, *args], cwd=work, env=env,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
    assert "77 new" in run.stdout
    shipped = {p.relative_to(target / "bot").as_posix() for p in (target / "bot").rglob("*")}
    assert "data/messagedaily-rl.xml" in shipped
    assert any(p.startswith("migrations/versions/0001") for p in shipped)
    assert "migrations/env.py" in shipped
