"""How far apart two people labelling the same weeks are: the ceiling for the grouping's score.

usage: python bench/label_agreement.py [SET ...]   (default: heldout3 .. heldout6, heldout15 .. heldout38)

Each set under tests/fixtures/ was labelled twice, independently: ``labels.tsv`` by the session
that wrote the entries, ``labels-second.tsv`` by another session that saw only the entries'
titles and summaries (never the first labels, the code or its output). Each labeller's primary
topics are taken as a grouping (one section per topic and week, no cap, no catch-all) and scored
with the shared scorer against the other's labels, as `bench/themes_quality.py` scores the
digest's grouping. If people agree at F1 0.95 and the grouping scores 0.6, the gap is the
method's, not the labels'.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.common import Row
from evaluation import grouping as tq

# the held-out sets labelled twice (held-out 7-14 were labelled once)
SETS = tuple(f"heldout{n}" for n in (*range(3, 7), *range(15, 39)))
Label = tuple[str, str, set[str]]  # title prefix, primary topic, all its topics


@dataclass(frozen=True)
class Agreement:
    """Two labellers of one set: how often their primaries match, and pairwise F1 both ways."""

    name: str
    entries: int
    same_primary: float  # share of entries with the same primary topic
    first_as_grouping: float  # F1 of the first labeller's primaries scored against the second's labels
    second_as_grouping: float  # and the other way round

    def show(self) -> str:
        return (f"{self.name:9} {self.entries} entries: same primary {self.same_primary:.2f}; "
                f"pairwise F1 first-vs-second {self.first_as_grouping:.3f}, "
                f"second-vs-first {self.second_as_grouping:.3f}")


def _as_grouping(grouper: dict[str, Label], labels: list[Label], weeks: dict[str, list[Any]],
                 score_mod: Any) -> float:
    """Score one labeller's primaries, taken as sections per week, against ``labels``."""
    outputs = []
    for items in weeks.values():
        sections: dict[str, list[dict[str, str]]] = {}
        for item in items:
            label = score_mod.find(labels, item.title)
            sections.setdefault(grouper[label[0]][1], []).append({"title": item.title})
        outputs.append({"themes": [{"catch_all": False, "entries": entries} for entries in sections.values()]})
    _, _, f1, unlabelled = score_mod.score(labels, outputs)
    if unlabelled:
        raise SystemExit(f"{unlabelled} entries match no label line: the label files do not fit the feed")
    return float(f1)


def agreement(name: str) -> Agreement:
    """Compare a set's two label files over its English feed (the same papers as the Chinese one)."""
    folder = (tq.HELDOUT if int(name.removeprefix("heldout")) in tq.HELDOUT_RL else tq.TRAIN) / name
    first = tq.load_labels(folder / "labels.tsv")
    second = tq.load_labels(folder / "labels-second.tsv")
    by_first = {label[0]: label for label in first}
    by_second = {label[0]: label for label in second}
    if by_first.keys() != by_second.keys():
        raise SystemExit(f"{name}: the two label files name different entries")
    weeks = tq.feed_weeks(folder / "rl-en.xml")
    score_mod = tq.scorer
    same = sum(by_first[key][1] == by_second[key][1] for key in by_first) / len(by_first)
    return Agreement(
        name, len(by_first), same,
        first_as_grouping=_as_grouping(by_first, second, weeks, score_mod),
        second_as_grouping=_as_grouping(by_second, first, weeks, score_mod),
    )


def run(names: Sequence[str] = SETS) -> list[Row]:
    """Rows for bench/run_all.py."""
    rows = []
    for name in names:
        found = agreement(name)
        rows.append(Row("themes", f"{name}: two labellers, same primary topic", f"{found.same_primary:.2f}", "", True))
        rows.append(Row("themes", f"{name}: two labellers, pairwise F1 (each as grouping, mean)",
                        f"{(found.first_as_grouping + found.second_as_grouping) / 2:.3f}", "", True))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sets", nargs="*", default=list(SETS), help=f"any of {', '.join(SETS)}")
    for name in parser.parse_args().sets:
        print(agreement(name).show())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
