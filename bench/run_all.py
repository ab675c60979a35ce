"""Run the benchmarks and write bench/RESULTS.md (machine, date, figures, ratios).

usage: python bench/run_all.py [ingest digest send send_parallel send_choices grouping themes_quality label_agreement]

RESULTS.md has one section per benchmark, with the date and machine it was
measured on. Running some of them replaces only their sections: the others
stay as they were, and so does any section not named after a benchmark
(hand-written notes, e.g. on why a target was missed).
"""

from __future__ import annotations

import importlib
import os
import platform
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from common import Row  # noqa: E402

BENCHES = ("startup", "ingest", "digest", "send", "send_parallel", "send_choices", "grouping", "themes_quality",
           "label_agreement")
# the bench column of rows in a file written before there were sections
OLD_LABELS = {"group": "grouping", "themes": "themes_quality", "send8": "send_parallel",
              "send1": "send_parallel", "send-pg": "send_parallel"}
HEADER = ["# Benchmark results", "",
          "Written by `make bench` (bench/run_all.py); each figure is measured next to its floor "
          "in the same run, and each section says when and where.", ""]
TABLE = ["| bench | metric | value | target | met |", "|---|---|---|---|---|"]


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


def section(name: str, rows: list[Row], when: str, where: str) -> list[str]:
    lines = [f"## {name}", "", f"- measured: {when} on {where}", "", *TABLE]
    lines += [f"| {r.bench} | {r.metric} | {r.value} | {r.target} | {'yes' if r.ok else '**no**'} |"
              for r in rows]
    return [*lines, ""]


def read_sections(text: str) -> dict[str, list[str]]:
    """The sections of an existing RESULTS.md, by title, in file order. A file
    from before sections (one table, one date) is split by its rows' bench."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
        if current is not None:
            current.append(line)
    if sections or "| bench |" not in text:
        for lines in sections.values():
            while lines and not lines[-1].strip():
                lines.pop()
            lines.append("")
        return sections
    date = re.search(r"^- date: (.+)$", text, re.MULTILINE)
    where = re.search(r"^- machine: (.+)$", text, re.MULTILINE)
    old: dict[str, list[Row]] = {}
    for cells in re.findall(r"^\| (.+) \|$", text, re.MULTILINE):
        bench, metric, value, target, met = (c.strip() for c in cells.split(" | "))
        if bench in ("bench", "---|---|---|---|---") or bench.startswith("---"):
            continue
        module = OLD_LABELS.get(bench, bench)
        old.setdefault(module, []).append(Row(bench, metric, value, target, met == "yes"))
    return {name: section(name, rows, date.group(1) if date else "?", where.group(1) if where else "?")
            for name, rows in old.items()}


def write_results(results: dict[str, list[Row]], path: Path) -> None:
    sections = read_sections(path.read_text(encoding="utf-8")) if path.exists() else {}
    when, where = f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC", machine()
    for name, rows in results.items():
        sections[name] = section(name, rows, when, where)
    ordered = [name for name in BENCHES if name in sections]
    ordered += [name for name in sections if name not in BENCHES]  # notes stay after the figures
    lines = list(HEADER)
    for name in ordered:
        lines += sections[name]
    path.write_text("\n".join(lines).rstrip("\n") + "\n", encoding="utf-8")


def main() -> int:
    chosen = sys.argv[1:] or list(BENCHES)
    results: dict[str, list[Row]] = {}
    for name in chosen:
        print(f"== {name}", flush=True)
        module = importlib.import_module(name)
        results[name] = []
        for row in module.run():
            print(row.show(), flush=True)
            results[name].append(row)
    write_results(results, HERE / "RESULTS.md")
    print(f"wrote {HERE / 'RESULTS.md'}")
    return 0 if all(r.ok for rows in results.values() for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
