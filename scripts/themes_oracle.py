#!/usr/bin/env python3
"""The best pairwise F1 any grouping could reach on a labelled set, from its labels alone.

Within ``max_sections`` (the catch-all counts) and with at most ``--catch-all``
of each week's entries in the catch-all, it tries every choice of section
topics per week, puts each entry in its primary topic's section or else in a
section of one of its other topics, and fills the catch-all, then any section,
with the rest. It says whether a set's weeks leave room for a perfect grouping
under the cap; it never runs the grouping, so it can be used on held-out sets.

    .venv/bin/python scripts/themes_oracle.py heldout2-en dev-late
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

from evaluation import grouping as tq

ROOT = Path(__file__).resolve().parent.parent


Label = tuple[str, set[str]]  # primary topic, all its topics


def _place(labels: list[Label], topics: tuple[str, ...], catch_max: int) -> tuple[dict[str, list[Label]], int]:
    sections: dict[str, list[Label]] = {topic: [] for topic in topics}
    catch_all = 0
    forced = []
    for primary, all_topics in labels:
        home = primary if primary in sections else next((t for t in topics if t in all_topics), None)
        if home is not None:
            sections[home].append((primary, all_topics))
        elif catch_all < catch_max:
            catch_all += 1
        else:
            forced.append((primary, all_topics))
    for entry in forced:  # nowhere it belongs and no room in the catch-all: the smallest section
        sections[min(topics, key=lambda t: len(sections[t]))].append(entry)
    return sections, catch_all


def _pairs(labels: list[Label], sections: dict[str, list[Label]]) -> tuple[int, int, int, int]:
    """(pairs sharing a topic, pairs sharing none, same-primary pairs together, same-primary pairs)."""
    agree = disagree = together = 0
    for members in sections.values():
        for a, b in itertools.combinations(members, 2):
            agree += bool(a[1] & b[1])
            disagree += not (a[1] & b[1])
            together += a[0] == b[0]
    same = sum(a[0] == b[0] for a, b in itertools.combinations(labels, 2))
    return agree, disagree, together, same


def _f1(agree: int, disagree: int, together: int, same: int) -> tuple[float, float, float]:
    precision = agree / (agree + disagree) if agree + disagree else 1.0
    recall = together / same if same else 1.0
    return precision, recall, (2 * precision * recall / (precision + recall) if precision + recall else 0.0)


def oracle(name: str, max_sections: int, catch_share: float) -> str:
    eval_set = tq.SETS[name]
    scorer = tq.scorer
    labelled = tq.load_labels(eval_set.labels)
    totals = [0, 0, 0, 0]
    caught = entries = 0
    for week, items in tq.feed_weeks(eval_set.feed).items():
        if eval_set.weeks and week not in eval_set.weeks:
            continue
        labels = [(found[1], found[2]) for found in (scorer.find(labelled, i.title) for i in items) if found]
        topics = sorted({primary for primary, _ in labels})
        catch_max = int(catch_share * len(labels))
        best: tuple[float, int, tuple[int, int, int, int]] | None = None
        for size in range(1, min(max_sections - 1, len(topics)) + 1):
            for chosen in itertools.combinations(topics, size):
                sections, catch_all = _place(labels, chosen, catch_max)
                counts = _pairs(labels, sections)
                f1 = _f1(*counts)[2]
                if best is None or (f1, -catch_all) > (best[0], -best[1]):
                    best = (f1, catch_all, counts)
        assert best is not None
        totals = [a + b for a, b in zip(totals, best[2], strict=True)]
        caught += best[1]
        entries += len(labels)
    precision, recall, f1 = _f1(*totals)
    return (f"{name:14} best possible within max_sections {max_sections}, catch-all <= {catch_share:.0%} a week: "
            f"P {precision:.3f} R {recall:.3f} F1 {f1:.3f}, catch-all {caught / max(entries, 1):.1%}")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("sets", nargs="*", default=["dev", "heldout-en", "heldout2-en"], choices=sorted(tq.SETS))
    parser.add_argument("--max-sections", type=int, default=8)
    parser.add_argument("--catch-all", type=float, default=0.15, help="largest catch-all share per week")
    args = parser.parse_args()
    for name in args.sets:
        print(oracle(name, args.max_sections, args.catch_all))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
