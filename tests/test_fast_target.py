"""`make test-fast`, the edit loop: every test but those marked `slow` (the grouping's quality runs
over every labelled set), which `make test` and CI still run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_the_fast_target_leaves_out_the_slow_tests_only() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    target = re.search(r"^test-fast:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert target and '-m "not slow"' in target.group(1)
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", "not slow",
         "tests/test_themes_quality.py", "tests/test_themes_pipeline.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    lines = collected.stdout.splitlines()
    assert not any("test_themes_quality.py::" in line for line in lines), collected.stdout
    assert any("test_themes_pipeline.py::" in line for line in lines), collected.stdout
