#!/usr/bin/env python3
"""Dev check for bot.themes: group a feed week by week, show it, and score it.

Writes one JSON file per ISO week (Asia/Shanghai) in the shape the scorer
reads (what `digestbot preview --format json` prints), scores the weeks the
labels cover, and with --show prints every week's sections with each entry's
label and why it is there. The labelled sets (dev and held-out) and their
scores side by side are python -m evaluation.grouping.

    .venv/bin/python scripts/eval_themes.py --show
    .venv/bin/python scripts/eval_themes.py --feed tests/fixtures/dev/pl-dev/pl-dev-en.xml \\
        --labels tests/fixtures/dev/pl-dev/pl-dev-en_labels.tsv --show
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from bot.themes import group_week, load_themes
from evaluation import grouping as tq

ROOT = Path(__file__).resolve().parent.parent



def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--feed", type=Path, default=tq.SETS["dev"].feed)
    parser.add_argument("--labels", type=Path, default=tq.SETS["dev"].labels)
    parser.add_argument("--themes", type=Path, default=None, help="themes file (default: packaged)")
    parser.add_argument("--out", type=Path, default=None, help="directory for week JSON files")
    parser.add_argument("--show", action="store_true", help="print every week's sections")
    args = parser.parse_args()

    themes = load_themes(args.themes)
    labels = tq.load_labels(args.labels)
    scorer = tq.scorer
    out_dir = args.out or Path(tempfile.mkdtemp(prefix="eval_themes_"))
    out_dir.mkdir(parents=True, exist_ok=True)
    weeks = tq.feed_weeks(args.feed)
    scored = []
    for week, items in weeks.items():
        history = [item for label, earlier in weeks.items() if label < week for item in earlier]
        grouping = group_week(items, themes, history=history)
        doc = tq.week_json(week, grouping.groups, items)
        (out_dir / f"{week}.json").write_text(json.dumps(doc, ensure_ascii=False, indent=2), encoding="utf-8")
        if any(scorer.find(labels, item.title) for item in items):
            scored.append(doc)
        if args.show:
            fit = "" if grouping.fit.fits else "  [themes do not fit: grouped by shared terms]"
            print(f"\n== {week}: {len(items)} entries, fit {grouping.fit.matched}/{grouping.fit.entries}{fit}")
            titles = {item.key: item.title for item in items}
            for group in grouping.groups:
                print(f"  [{group.kind}] {group.name or '(catch-all)'} ({len(group.keys)})")
                for why in group.explanations:
                    label = scorer.find(labels, titles[why.key])
                    code = label[1] if label else "-"
                    top = ", ".join(f"{s.theme_key} {s.score:g}" for s in why.top[:2])
                    print(f"      {code:8} {why.reason:17} {titles[why.key][:70]}  | {top}")
    print(f"\nweek files in {out_dir}")
    if scored:
        precision, recall, f1, unlabelled = scorer.score(labels, scored)
        print(f"{len(scored)} labelled week(s): precision {precision:.3f} recall {recall:.3f} "
              f"f1 {f1:.3f} (unlabelled {unlabelled})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
