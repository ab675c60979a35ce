"""Grouping quality for `make bench`: the mean F1 of each split, next to its floor.

usage: python bench/run_all.py themes_quality  (per set: python -m evaluation.grouping SET ...)

Held-out sets are reported as split means only (evaluation/__init__.py says why).
"""

from __future__ import annotations

from common import Row  # bench/run_all.py puts bench/ on the path

from evaluation.grouping import mean_f1, names_in

HELD_OUT_GOAL = 0.85  # what a second labeller reaches on held-out 31-38 (docs/grouping-quality.md)


def run() -> list[Row]:
    """One row per split and kind of themes file: the mean F1 over its sets."""
    rows = []
    for split in ("train", "dev", "heldout"):
        for kind in ("rl", "suggest", "nofile"):
            names = names_in(split, kind)  # type: ignore[arg-type]
            if not names:
                continue
            f1 = mean_f1(names)
            goal = HELD_OUT_GOAL if (split, kind) == ("heldout", "rl") else None
            rows.append(Row("themes", f"{split} {kind}: mean pairwise F1 over {len(names)} sets", f"{f1:.3f}",
                            f">= {goal}" if goal else "", goal is None or f1 >= goal))
    return rows


if __name__ == "__main__":
    for row in run():
        print(row.show())
