"""Every module of the package imports on its own, first, in a fresh interpreter.

An import circle hides as long as some other module happens to be imported
first; a command or a library user that starts elsewhere meets it as an
ImportError (seen: `digestbot poll` failing on bot.llm.present)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import bot

ROOT = Path(bot.__file__).parent


def modules() -> list[str]:
    """Every module of ``bot`` but the ``__main__`` ones (importing those runs the command)."""
    return sorted(info.name for info in pkgutil.walk_packages([str(ROOT)], prefix="bot.")
                  if not info.name.endswith(".__main__"))


def test_every_module_imports_first_on_its_own() -> None:
    names = modules()
    assert "bot.llm.present" in names and "bot.digest.build" in names
    script = ("import importlib, subprocess, sys\n"
              "failed = []\n"
              "for name in sys.argv[1:]:\n"
              "    done = subprocess.run([sys.executable, '-c', f'import {name}'], capture_output=True, text=True)\n"
              "    if done.returncode:\n"
              "        failed.append(f'{name}: {done.stderr.strip().splitlines()[-1]}')\n"
              "print('\\n'.join(failed))\n")
    done = subprocess.run([sys.executable, "-c", script, *names], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", done.stdout
