"""The ablation table and the editor's learning curve of docs/grouping.md.

usage: python -m evaluation.ablation [table|curve]

``table``: each mechanism switched off in turn, the mean F1 of each split (held-out sets only
as means). ``curve``: an editor who, after each week of a held-out feed, moves every entry the
grouping put in another theme than its label's primary; the mean F1 of each week, with and
without the labels of the weeks before it.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from unittest import mock

from bot.themes import EditorLabel, group_week, pipeline, readers
from evaluation import grouping as ev

Switch = Callable[[], Iterator[None]]


@contextmanager
def _patch(target: object, name: str, value: object) -> Iterator[None]:
    with mock.patch.object(target, name, value):
        yield


def _without_reader(name: str) -> Callable[[], object]:
    kept = tuple(r for r in readers.READERS if r.__name__ != name)
    return lambda: _patch(pipeline, "READERS", kept)


SWITCHES: dict[str, Callable[[], object]] = {
    "all readers": lambda: _patch(readers, "MAX_HISTORY", readers.MAX_HISTORY),
    "without words": _without_reader("words"),
    "without feed": _without_reader("feed"),
}
KINDS = (("dev", "suggest"), ("heldout", "rl"), ("heldout", "suggest"))


def table() -> None:
    print("| pipeline | " + " | ".join(f"{split} {kind}" for split, kind in KINDS) + " |")
    print("|---|" + "---|" * len(KINDS))
    for name, switch in SWITCHES.items():
        with switch():  # type: ignore[attr-defined]
            figures = [ev.mean_f1(ev.names_in(split, kind)) for split, kind in KINDS]  # type: ignore[arg-type]
        print(f"| {name} | " + " | ".join(f"{f:.3f}" for f in figures) + " |")


def curve(names: list[str] | None = None) -> None:
    """Mean F1 per week of the held-out RL feeds, without and with the editor's earlier labels."""
    names = names or ev.names_in("heldout", "rl")
    themes = ev.load_themes(None)
    by_week: dict[int, tuple[list[float], list[float]]] = {}
    for name in names:
        eval_set = ev.SETS[name]
        labels = ev.load_labels(eval_set.labels)
        weeks = ev.feed_weeks(eval_set.feed)
        editor: list[EditorLabel] = []
        for n, (week, items) in enumerate(weeks.items()):
            past = [i for label, w in weeks.items() if label < week for i in w]
            plain = group_week(items, themes, history=past).groups
            taught = group_week(items, themes, history=past, labels=editor).groups
            scores = [ev.scorer.score(labels, [ev.week_json(week, g, items)])[2] for g in (plain, taught)]
            by_week.setdefault(n + 1, ([], []))[0].append(scores[0])
            by_week[n + 1][1].append(scores[1])
            placed = {key: g.theme_key for g in taught for key in g.keys}
            for item in items:  # the editor corrects this week's misplaced entries
                found = ev.scorer.find(labels, item.title)
                primary = ev.THEME_OF_CODE.get(found[1]) if found else None
                if primary and placed.get(item.key) != primary:
                    editor.append(EditorLabel(item.title, item.summary, primary, week))
    print("| week of the feed | without labels | with the editor's labels of the weeks before |")
    print("|---|---|---|")
    for n, (plain_scores, taught_scores) in sorted(by_week.items()):
        print(f"| {n} | {statistics.mean(plain_scores):.3f} | {statistics.mean(taught_scores):.3f} |")


if __name__ == "__main__":
    (curve if sys.argv[1:] == ["curve"] else table)()
