"""How well the language model's readings group held-out weeks: recorded answers replayed.

usage: python bench/llm_quality.py [SET ...]

For each set of tests/fixtures/llm/ (see its README) it starts the loopback
chat-completions server (tests/llm_server.py) serving the recorded answers by
request hash, sends every entry's reading request through the bot's own client
(``bot.llm.client.Caller``), validates each answer as the bot does, groups each
week by the model's primary theme (no valid answer or no theme: the catch-all),
and prints pairwise F1 with tests/fixtures/eval/score_grouping.py beside the
offline grouping's F1 on the same weeks. Sets without answers yet are said so.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).parent))

import themes_quality as tq  # noqa: E402
from llm_server import replay, running  # noqa: E402

from bot.config import load_settings  # noqa: E402
from bot.ingest.parse import parse  # noqa: E402
from bot.llm import shim  # noqa: E402
from bot.llm.answer import AnswerError, Reading, parse_reading  # noqa: E402
from bot.llm.client import Budget, Caller, CallError  # noqa: E402
from bot.llm.reader import entry_text_of, request_for, tldr_languages  # noqa: E402
from bot.themes import ThemeSet, load_themes  # noqa: E402

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


def llm_weeks(name: str, read: dict[str, Reading | None], confident_only: bool) -> list[dict[str, Any]]:
    """The set's weeks as the scorer reads them, grouped by the model's primary theme."""
    weeks = tq.feed_weeks(LLM / "sets" / name / "feed.xml", vectors=False)
    out = []
    for week, items in weeks.items():
        sections: dict[str, list[str]] = {}
        rest = []
        for item in items:
            r = read.get(item.title)
            if r is None or r.primary is None or (confident_only and not r.confident):
                rest.append(item.title)
            else:
                sections.setdefault(r.primary, []).append(item.title)
        themes = [{"name": k, "catch_all": False, "entries": [{"title": t} for t in v]}
                  for k, v in sorted(sections.items())]
        themes.append({"name": "", "catch_all": True, "entries": [{"title": t} for t in rest]})
        out.append({"week": week, "themes": themes})
    return out


def offline(name: str, themes: ThemeSet, read: dict[str, Reading | None] | None = None) -> float:
    """The offline grouping's F1; with ``read``, as the bot ships it: a confident reading moves its
    entry to its theme's section over the offline grouping (``bot.llm.shim``), the rest stay."""
    eval_set = tq.EvalSet(name, LLM / "sets" / name / "feed.xml", LLM / "sets" / name / "labels.tsv")
    if read is None:
        score, _ = tq.evaluate(eval_set, themes)
        return score.f1

    def grouper(items: Any, themes: ThemeSet, history: Any) -> Any:
        by_key = {item.key: read.get(item.title) for item in items}
        return shim.decide(tq.grouped(items, themes, history), {k: r for k, r in by_key.items() if r}, themes)

    score, _ = tq.evaluate(eval_set, themes, grouper)
    return score.f1


def main(names: list[str]) -> int:
    score_mod = tq.scorer()
    sets = names or sorted(p.name for p in (LLM / "prompts").iterdir() if p.is_dir())
    for name in sets:
        themes = load_themes(THEMES.get(name))
        answers = LLM / "answers" / name
        total = len(list((LLM / "prompts" / name).glob("*.json")))
        base = offline(name, themes)
        if not answers.is_dir() or not any(answers.glob("*.json")):
            print(f"{name:13} no recorded answers yet ({total} prompts)   | offline F1 {base:.3f}")
            continue
        read, answered, refused = readings(name, themes)
        labels = tq.load_labels(LLM / "sets" / name / "labels.tsv")
        p, r, f1, _ = score_mod.score(labels, llm_weeks(name, read, confident_only=False))
        _, _, f1_sure, _ = score_mod.score(labels, llm_weeks(name, read, confident_only=True))
        shipped = offline(name, themes, read)
        print(f"{name:13} LLM primary F1 {f1:.3f} (P {p:.3f} R {r:.3f}; confident only, rest unsorted "
              f"{f1_sure:.3f}) | as shipped (confident decide, rest offline) {shipped:.3f} | offline F1 {base:.3f}"
              f"  [answers {answered}/{total}, refused {refused}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
