"""How well the language model's readings group held-out weeks: recorded answers replayed.

usage: python -m bench.llm_quality [SET ...]

For each set of tests/fixtures/llm/ (see its README) it starts the loopback
chat-completions server (``evaluation.llm_server``) serving the recorded answers by
request hash, sends every entry's reading request through the bot's own client
(``bot.llm.client.Caller``), validates each answer as the bot does, and prints
pairwise F1 (``evaluation.score``) three ways: the weeks grouped by the model's
primary theme alone; the pipeline as shipped, the model one more reader
(``bot.llm.reader.llm_reader``: a confident answer decides, the rest is the
offline readers'); and the offline pipeline alone.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bot.config import load_settings
from bot.ingest.parse import parse
from bot.llm.answer import AnswerError, Reading, parse_reading
from bot.llm.client import Budget, Caller, CallError
from bot.llm.reader import entry_text_of, llm_reader, request_for, tldr_languages
from bot.themes import READERS, Group, Item, ThemeSet, group_week, load_themes
from evaluation import score as score_mod
from evaluation.grouping import EvalSet, evaluate, feed_weeks, load_labels
from evaluation.llm_server import replay, running

ROOT = Path(__file__).resolve().parent.parent
LLM = ROOT / "tests" / "fixtures" / "llm"
MODEL = "recorded-eval"
THEMES = {"bio-en": LLM / "sets" / "bio-themes.toml"}


def readings(name: str, themes: ThemeSet) -> tuple[dict[str, Reading | None], int, int]:
    """Each entry's reading by title (None: no valid answer), answers found, answers refused."""
    feed = LLM / "sets" / name / "feed.xml"
    parsed = parse(feed.read_bytes(), f"https://{name}.example/feed.xml")
    found: dict[str, Reading | None] = {}
    answered = refused = 0
    with running(replay(LLM / "prompts" / name, LLM / "answers" / name)) as server:
        settings = load_settings({"DIGESTBOT_LLM_BASE_URL": server.base_url, "DIGESTBOT_LLM_MODEL": MODEL,
                                  "DIGESTBOT_LLM_TIMEOUT": "10", "DIGESTBOT_DATABASE_URL": "sqlite://"})
        caller = Caller(settings, Budget(10_000), sleep=lambda s: None)
        for entry in parsed.entries:
            title, summary = entry_text_of(entry.title, entry.summary_text)
            body = request_for(MODEL, themes, title, summary, tldr_languages())
            try:
                content = caller.complete(body)
                answered += 1
                found[title] = parse_reading(content, MODEL, [t.key for t in themes.themes], tldr_languages(),
                                             f"{title}\n{summary}")
            except CallError:
                found[title] = None
                caller.breaker.record(True)  # a missing answer is not a failing endpoint
            except AnswerError:
                refused += 1
                found[title] = None
    return found, answered, refused


def primary_weeks(name: str, read: dict[str, Reading | None]) -> list[dict[str, Any]]:
    """The set's weeks as the scorer reads them, grouped by the model's primary theme alone."""
    out = []
    for week, items in feed_weeks(LLM / "sets" / name / "feed.xml").items():
        sections: dict[str, list[str]] = {}
        rest = []
        for item in items:
            r = read.get(item.title)
            if r is None or r.primary is None:
                rest.append(item.title)
            else:
                sections.setdefault(r.primary, []).append(item.title)
        themes = [{"name": k, "catch_all": False, "entries": [{"title": t} for t in v]}
                  for k, v in sorted(sections.items())]
        themes.append({"name": "", "catch_all": True, "entries": [{"title": t} for t in rest]})
        out.append({"week": week, "themes": themes})
    return out


def pipeline_f1(name: str, themes: ThemeSet, read: dict[str, Reading | None] | None = None) -> float:
    """The pipeline's F1 on the set: offline alone, or with the model as one more reader."""
    eval_set = EvalSet(name, LLM / "sets" / name / "feed.xml", LLM / "sets" / name / "labels.tsv")

    def grouper(items: Sequence[Item], themes: ThemeSet, history: Sequence[Item]) -> list[Group]:
        extra = {"llm": {item.key: r for item in items if (r := (read or {}).get(item.title))}}
        readers = (*READERS, llm_reader) if read is not None else READERS
        return group_week(items, themes, history=history, extra=extra, readers=readers).groups

    score, _ = evaluate(eval_set, themes, grouper)
    return score.f1


def main(names: list[str]) -> int:
    sets = names or sorted(p.name for p in (LLM / "prompts").iterdir() if p.is_dir())
    for name in sets:
        themes = load_themes(THEMES.get(name))
        answers = LLM / "answers" / name
        total = len(list((LLM / "prompts" / name).glob("*.json")))
        base = pipeline_f1(name, themes)
        if not answers.is_dir() or not any(answers.glob("*.json")):
            print(f"{name:13} no recorded answers yet ({total} prompts)   | offline F1 {base:.3f}")
            continue
        read, answered, refused = readings(name, themes)
        labels = load_labels(LLM / "sets" / name / "labels.tsv")
        p, r, f1, _ = score_mod.score(labels, primary_weeks(name, read))
        shipped = pipeline_f1(name, themes, read)
        print(f"{name:13} LLM primary F1 {f1:.3f} (P {p:.3f} R {r:.3f}) | as shipped (one more reader) "
              f"{shipped:.3f} | offline F1 {base:.3f}  [answers {answered}/{total}, refused {refused}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
