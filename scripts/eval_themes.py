#!/usr/bin/env python3
"""Dev check for bot.themes: group the fixture feed week by week and score it.

Writes one JSON file per ISO week (Asia/Shanghai) in the shape the scorer
reads, runs the scorer on the labelled weeks, and with --show prints every
week's sections for eyeballing.

    .venv/bin/python scripts/eval_themes.py --show
"""

from __future__ import annotations

import argparse
import html
import json
import re
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import feedparser

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.themes import Group, Item, ThemeSet, group_items, load_themes  # noqa: E402

SHANGHAI = ZoneInfo("Asia/Shanghai")
DEFAULT_FEED = ROOT / "tests" / "fixtures" / "messagedaily-rl.xml"
DEFAULT_EVAL_DIR = ROOT.parent / "shared" / "eval"
LABELLED_WEEKS = ("2026-W35", "2026-W36")


def plain_text(markup: str) -> str:
    """Strip tags and entities; the feed's descriptions are mostly plain already."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


def iso_week(entry: feedparser.FeedParserDict) -> str:
    parsed = entry.get("published_parsed") or entry.get("updated_parsed")
    year, month, day, hour, minute, second = parsed[:6]
    when = datetime(year, month, day, hour, minute, second, tzinfo=UTC).astimezone(SHANGHAI)
    year, week, _ = when.isocalendar()
    return f"{year}-W{week:02d}"


def weekly_items(feed_path: Path) -> dict[str, list[Item]]:
    feed = feedparser.parse(str(feed_path))
    weeks: dict[str, list[Item]] = {}
    for entry in feed.entries:
        key = entry.get("id") or entry.get("link") or entry.get("title", "")
        item = Item(
            key=key,
            title=plain_text(entry.get("title", "")),
            summary=plain_text(entry.get("description", "")),
        )
        weeks.setdefault(iso_week(entry), []).append(item)
    return dict(sorted(weeks.items()))


def week_json(week: str, groups: list[Group], items: list[Item]) -> dict[str, object]:
    titles = {item.key: item.title for item in items}
    return {
        "week": week,
        "themes": [
            {
                "name": group.name,
                "name_en": group.name_en,
                "catch_all": group.catch_all,
                "entries": [{"title": titles[key]} for key in group.keys],
            }
            for group in groups
        ],
    }


def show(week: str, groups: list[Group], items: list[Item], elapsed: float) -> None:
    titles = {item.key: item.title for item in items}
    print(f"\n== {week}: {len(items)} entries, {len(groups)} sections ({elapsed * 1000:.0f} ms)")
    for group in groups:
        tag = " [catch-all]" if group.catch_all else ("" if group.theme_key else " [derived]")
        print(f"  {group.name} / {group.name_en} ({len(group.keys)}){tag}")
        for key in group.keys:
            print(f"      - {titles[key][:90]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--feed", type=Path, default=DEFAULT_FEED)
    parser.add_argument("--themes", type=Path, default=None, help="themes file (default: packaged)")
    parser.add_argument("--out", type=Path, default=None, help="directory for week JSON files")
    parser.add_argument("--scorer", type=Path, default=DEFAULT_EVAL_DIR / "score_grouping.py")
    parser.add_argument("--labels", type=Path, default=DEFAULT_EVAL_DIR / "dev_labels.tsv")
    parser.add_argument("--show", action="store_true", help="print every week's sections")
    args = parser.parse_args()

    themes: ThemeSet = load_themes(args.themes)
    out_dir = args.out or Path(tempfile.mkdtemp(prefix="eval_themes_"))
    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for week, items in weekly_items(args.feed).items():
        started = time.perf_counter()
        groups = group_items(items, themes)
        elapsed = time.perf_counter() - started
        path = out_dir / f"{week}.json"
        path.write_text(json.dumps(week_json(week, groups, items), ensure_ascii=False, indent=2))
        written[week] = path
        if args.show:
            show(week, groups, items, elapsed)

    print(f"\nweek files in {out_dir}")
    labelled = [str(written[w]) for w in LABELLED_WEEKS if w in written]
    if not args.scorer.exists() or not args.labels.exists():
        print(f"scorer or labels not found ({args.scorer}, {args.labels}); skipping score")
        return 0
    result = subprocess.run(
        [sys.executable, str(args.scorer), str(args.labels), *labelled],
        capture_output=True,
        text=True,
        check=False,
    )
    print(f"{' + '.join(LABELLED_WEEKS)}: {result.stdout.strip()}{result.stderr.strip()}")
    return result.returncode


if __name__ == "__main__":
    raise SystemExit(main())
