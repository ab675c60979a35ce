"""Run every benchmark and write bench/RESULTS.md (machine, date, figures, ratios).

usage: python bench/run_all.py [ingest digest send]
"""

from __future__ import annotations

import importlib
import os
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from common import Row  # noqa: E402

BENCHES = ("ingest", "digest", "send", "grouping", "themes_quality")


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"


def write_results(rows: list[Row], path: Path) -> None:
    lines = [
        "# Benchmark results",
        "",
        f"- machine: {machine()}",
        f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "- written by `make bench` (bench/run_all.py); each figure is measured next to its floor in the same run",
        "",
        "| bench | metric | value | target | met |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {r.bench} | {r.metric} | {r.value} | {r.target} | {'yes' if r.ok else '**no**'} |"
              for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> int:
    chosen = sys.argv[1:] or list(BENCHES)
    rows: list[Row] = []
    for name in chosen:
        print(f"== {name}", flush=True)
        module = importlib.import_module(name)
        for row in module.run():
            print(row.show(), flush=True)
            rows.append(row)
    write_results(rows, HERE / "RESULTS.md")
    print(f"wrote {HERE / 'RESULTS.md'}")
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
