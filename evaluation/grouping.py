"""How well the theme grouping matches hand labels, per labelled set and split.

usage: python -m evaluation.grouping [--themes FILE] [--split train|dev|heldout] [SET ...]

The sets are described in tests/fixtures/README.md and each folder's README.
For each set it prints pairwise precision / recall / F1 (evaluation/score.py)
and the share of entries in the catch-all, next to "one section per week" as a floor.
`run()` gives the same figures as rows for bench/run_all.py.
"""

from __future__ import annotations

import argparse
import html
import re
import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo

import feedparser

from bot.themes import Group, Item, ThemeSet, group_items, load_themes
from evaluation import score as scorer

ROOT = Path(__file__).resolve().parent.parent

FIXTURES = ROOT / "tests" / "fixtures"
TRAIN, DEV, HELDOUT = FIXTURES / "train", FIXTURES / "dev", FIXTURES / "heldout"  # one folder per split
EVAL = TRAIN / "bundled"  # the bundled feed's labelled weeks and their English write-ups
OTHER_FIELDS = ("vision-en", "security-en", "bio-en", "systems-zh", "recsys-zh")
SHANGHAI = ZoneInfo("Asia/Shanghai")
# the RL sets' label codes and the bundled themes file's keys
THEME_OF_CODE = {
    "CA": "credit_assignment", "OPD": "on_policy_distillation", "HAR": "harness_engineering",
    "SKM": "skills_memory_context", "SWE": "coding_agents", "ENV": "environments_infra",
    "SELF": "self_improvement", "SEC": "safety_security", "EXP": "exploration_data",
    "RM": "reward_models", "MM": "multimodal_world", "MA": "multi_agent", "EVAL": "benchmarks",
}


@dataclass(frozen=True)
class EvalSet:
    """A feed, its labels and the weeks that count."""

    name: str
    feed: Path
    labels: Path
    weeks: tuple[str, ...] | None = None  # None: every week of the feed
    suggest: bool = False  # group with a themes file suggested from the feed itself

    @property
    def split(self) -> Split:
        """What the set may be used for (``evaluation`` module docstring)."""
        return split_of(self.name)


Split = Literal["train", "dev", "heldout"]
HELDOUT_RL = tuple(range(31, 39))  # the RL sets the theme pack never saw
HELDOUT_FIELDS = ("db", "bio-en", "systems-zh")  # other fields, never read


def split_of(name: str) -> Split:
    """The split of a set by its name: held-out 31-38 and three other fields are held out; the
    other fields are dev; every other RL set trained the theme pack's word model."""
    base = name.removesuffix("-suggest")
    if base in HELDOUT_FIELDS or any(name.startswith(f"heldout{n}-") for n in HELDOUT_RL):
        return "heldout"
    if base in ("pl-dev", *OTHER_FIELDS):
        return "dev"
    return "train"


def field_folder(name: str) -> Path:
    """Where another field's feed lives: dev/ or heldout/, by its split."""
    return (HELDOUT if name in HELDOUT_FIELDS else DEV) / name


def _field(name: str) -> dict[str, EvalSet]:
    """Another field's feed, grouped as the digest would (the default themes do not fit it) and with
    a themes file suggested from the feed itself."""
    folder = field_folder(name)
    feed, labels = folder / f"{name}.xml", folder / f"{name}_labels.tsv"
    suggested = f"{name}-suggest"
    return {name: EvalSet(name, feed, labels), suggested: EvalSet(suggested, feed, labels, suggest=True)}


def _pair(folder: Path, chinese: str, english: str) -> dict[str, EvalSet]:
    """A set written up in both languages (rl-zh.xml, rl-en.xml) with one labels.tsv."""
    return {
        chinese: EvalSet(chinese, folder / "rl-zh.xml", folder / "labels.tsv"),
        english: EvalSet(english, folder / "rl-en.xml", folder / "labels.tsv"),
    }


PL_DEV = DEV / "pl-dev"
SETS: dict[str, EvalSet] = {
    "dev": EvalSet("dev", FIXTURES / "messagedaily-rl.xml", EVAL / "dev_labels.tsv", ("2026-W35", "2026-W36")),
    "dev-en": EvalSet("dev-en", EVAL / "dev-en.xml", EVAL / "dev-en_labels.tsv"),
    "dev-late": EvalSet("dev-late", FIXTURES / "messagedaily-rl.xml", EVAL / "dev-late_labels.tsv",
                        ("2026-W37", "2026-W38", "2026-W39", "2026-W40")),
    "dev-en-late": EvalSet("dev-en-late", EVAL / "dev-en-late.xml", EVAL / "dev-en-late_labels.tsv"),
    "dev-native-en": EvalSet("dev-native-en", EVAL / "dev-native-en.xml", EVAL / "dev-native-en_labels.tsv"),
    "pl-dev": EvalSet("pl-dev", PL_DEV / "pl-dev-en.xml", PL_DEV / "pl-dev-en_labels.tsv"),
    "pl-dev-suggest": EvalSet("pl-dev-suggest", PL_DEV / "pl-dev-en.xml", PL_DEV / "pl-dev-en_labels.tsv",
                              suggest=True),
    "heldout-zh": EvalSet("heldout-zh", TRAIN / "heldout1" / "rl-zh.xml", TRAIN / "heldout1" / "rl-zh_labels.tsv"),
    "heldout-en": EvalSet("heldout-en", TRAIN / "heldout1" / "rl-en.xml", TRAIN / "heldout1" / "rl-en_labels.tsv"),
    **_pair(TRAIN / "dev6", "dev6", "dev6-en"),
    **_pair(TRAIN / "dev7", "dev7", "dev7-en"),
    **_pair(TRAIN / "dev8", "dev8", "dev8-en"),
    **_pair(TRAIN / "dev9", "dev9", "dev9-en"),
    **_pair(TRAIN / "dev10", "dev10", "dev10-en"),
    **_pair(TRAIN / "dev11", "dev11", "dev11-en"),
    **_pair(TRAIN / "dev12", "dev12", "dev12-en"),
    **_pair(TRAIN / "dev13", "dev13", "dev13-en"),
    **_pair(TRAIN / "dev14", "dev14", "dev14-en"),
    # held-out 2-38: one folder each, its Chinese and English feeds (2-30 trained the word model)
    **{name: eval_set for n in range(2, 39)
       for name, eval_set in _pair((HELDOUT if n in HELDOUT_RL else TRAIN) / f"heldout{n}", f"heldout{n}-zh",
                                   f"heldout{n}-en").items()},
    "db": EvalSet("db", HELDOUT / "db" / "db-en.xml", HELDOUT / "db" / "db-en_labels.tsv"),
    "db-suggest": EvalSet("db-suggest", HELDOUT / "db" / "db-en.xml", HELDOUT / "db" / "db-en_labels.tsv",
                          suggest=True),
    **{name: eval_set for field in OTHER_FIELDS for name, eval_set in _field(field).items()},
}


@dataclass(frozen=True)
class Score:
    """Pairwise figures over a set's weeks, and the catch-all's share of entries."""

    precision: float
    recall: float
    f1: float
    catch_all_share: float
    entries: int
    unlabelled: int

    def show(self) -> str:
        return (
            f"P {self.precision:.3f}  R {self.recall:.3f}  F1 {self.f1:.3f}  "
            f"catch-all {self.catch_all_share:5.1%}  ({self.entries} entries, {self.unlabelled} unlabelled)"
        )


def load_labels(path: Path) -> list[tuple[str, str, set[str]]]:
    """The labels TSV as the scorer reads it (its own reader leaves the file open)."""
    labels = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            if line.startswith("#") or not line.strip():
                continue
            parts = line.rstrip("\n").split("\t")
            others = [p for p in (parts[2].split(",") if len(parts) > 2 else []) if p]
            labels.append((parts[0], parts[1], {parts[1], *others}))
    return labels


def _plain(markup: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


def feed_weeks(path: Path) -> dict[str, list[Item]]:
    """A feed's entries as items, split into ISO weeks in Asia/Shanghai."""
    weeks: dict[str, list[Item]] = {}
    for entry in feedparser.parse(str(path)).entries:
        stamp = entry.get("published_parsed") or entry.get("updated_parsed")
        year_, month, day, hour, minute, second = stamp[:6]
        when = datetime(year_, month, day, hour, minute, second, tzinfo=UTC).astimezone(SHANGHAI)
        year, week, _ = when.isocalendar()
        item = Item(key=entry.get("id") or entry.link, title=_plain(entry.title), summary=_plain(entry.description))
        weeks.setdefault(f"{year}-W{week:02d}", []).append(item)
    return dict(sorted(weeks.items()))


def week_json(week: str, groups: Sequence[Group], items: Sequence[Item]) -> dict[str, Any]:
    """The shape `digestbot preview --format json` prints, as far as the scorer reads it."""
    titles = {item.key: item.title for item in items}
    return {
        "week": week,
        "themes": [
            {"name": g.name, "catch_all": g.catch_all, "entries": [{"title": titles[k]} for k in g.keys]}
            for g in groups
        ],
    }


def one_section(items: Sequence[Item], themes: ThemeSet, history: Sequence[Item] = ()) -> list[Group]:
    """The floor: the whole week in one named section."""
    keys = tuple(item.key for item in items)
    return [Group(name="all", name_en="all", description="", catch_all=False, keys=keys, theme_key=None)]


Grouper = Callable[[Sequence[Item], ThemeSet, Sequence[Item]], list[Group]]


def grouped(items: Sequence[Item], themes: ThemeSet, history: Sequence[Item] = ()) -> list[Group]:
    """What the digest does: the week's items, with the feed's history up to that week."""
    return group_items(items, themes, history=history)


def evaluate(
    eval_set: EvalSet, themes: ThemeSet, grouper: Grouper = grouped, show: bool = False, history: bool = True
) -> tuple[Score, list[dict[str, Any]]]:
    """Group every week of a set and score it against its labels.

    With ``history`` each week also sees the feed's entries of the weeks up to
    it (as the digest does from the database), never later ones.
    """
    score_mod = scorer
    labels = load_labels(eval_set.labels)
    weeks = feed_weeks(eval_set.feed)
    chosen = eval_set.weeks or tuple(weeks)
    outputs = []
    entries = in_catch_all = 0
    for week in chosen:
        items = weeks[week]
        past = [item for label, week_items in weeks.items() if label < week for item in week_items]
        groups = grouper(items, themes, past if history else [])
        outputs.append(week_json(week, groups, items))
        entries += len(items)
        in_catch_all += sum(len(g.keys) for g in groups if g.catch_all)
        if show:
            _show(week, groups, items, labels, score_mod)
    precision, recall, f1, unlabelled = score_mod.score(labels, outputs)
    return Score(precision, recall, f1, in_catch_all / entries if entries else 0.0, entries, unlabelled), outputs


def _show(week: str, groups: Sequence[Group], items: Sequence[Item], labels: Any, score_mod: Any) -> None:
    titles = {item.key: item.title for item in items}
    print(f"\n== {week}: {len(items)} entries, {len(groups)} sections")
    for group in groups:
        tag = " [catch-all]" if group.catch_all else ("" if group.theme_key else " [derived]")
        print(f"  {group.name} / {group.name_en} ({len(group.keys)}){tag}")
        for key in group.keys:
            label = score_mod.find(labels, titles[key])
            code = "?" if label is None else "+".join([label[1], *sorted(label[2] - {label[1]})])
            print(f"      {code:12} {titles[key][:88]}")


def themes_for(eval_set: EvalSet, themes_file: Path | None) -> ThemeSet:
    """The themes a set is grouped with: the given file, or one suggested from the feed."""
    if not eval_set.suggest:
        return load_themes(themes_file)
    from bot.themes import parse_themes, suggest_themes

    items = [item for week in feed_weeks(eval_set.feed).values() for item in week]
    with tempfile.TemporaryDirectory() as tmp:
        text = suggest_themes(items)
        Path(tmp, "themes.toml").write_text(text, encoding="utf-8")
        return parse_themes(text, "suggested")


def mean_f1(names: Sequence[str], themes_file: Path | None = None) -> float:
    """The mean F1 over the named sets: what the docs' ablation table reports per split."""
    scores = [evaluate(SETS[name], themes_for(SETS[name], themes_file))[0].f1 for name in names]
    return statistics.mean(scores) if scores else 0.0


def names_in(split: Split, kind: str = "rl") -> list[str]:
    """The sets of ``split``: ``rl`` (the bundled themes), ``suggest`` (a suggested themes file)
    or ``nofile`` (another field grouped by shared terms)."""
    chosen = []
    for name, eval_set in SETS.items():
        other = not name.startswith(("dev", "heldout")) or name in ("pl-dev", "pl-dev-suggest")
        what = "suggest" if eval_set.suggest else "nofile" if other else "rl"
        if eval_set.split == split and what == kind:
            chosen.append(name)
    return chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sets", nargs="*", default=list(SETS), help=f"any of {', '.join(SETS)}")
    parser.add_argument("--themes", type=Path, default=None, help="themes file (default: packaged)")
    parser.add_argument("--show", action="store_true", help="print every week's sections with labels")
    parser.add_argument("--split", choices=("train", "dev", "heldout"), help="only the mean of this split's sets")
    args = parser.parse_args()
    if args.split:
        for kind in ("rl", "suggest", "nofile"):
            names = names_in(args.split, kind)
            if names:
                print(f"{args.split} {kind}: mean F1 {mean_f1(names, args.themes):.4f} over {len(names)} sets")
        return 0
    for name in args.sets:
        if SETS[name].split == "heldout" and args.show:
            raise SystemExit(f"{name} is held out: its entries are never shown (see evaluation/__init__.py)")
        eval_set = SETS[name]
        themes = themes_for(eval_set, args.themes)
        score, _ = evaluate(eval_set, themes, show=args.show)
        floor, _ = evaluate(eval_set, themes, one_section)
        print(f"{name:11} {score.show()}   | one section/week F1 {floor.f1:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
