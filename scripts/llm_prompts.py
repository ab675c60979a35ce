#!/usr/bin/env python3
"""Write the exact reading requests the bot sends for the held-out evaluation sets.

usage: python scripts/llm_prompts.py [SET ...]

For each set (``SETS``) it copies the feed and its labels under
tests/fixtures/llm/sets/<set>/ and writes one chat-completions body per entry to
tests/fixtures/llm/prompts/<set>/<n>.json, built by the function the bot calls
(``bot.llm.reader.request_for``) on the text the poll stores (``bot.ingest.parse``).
``index.json`` beside the feed maps each ``n`` to its title, publication time and
body hash (what the replay server matches on). Answers go to
tests/fixtures/llm/answers/<set>/<n>.json; bench/llm_quality.py scores them.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.ingest.parse import parse  # noqa: E402
from bot.llm.prompt import body_hash  # noqa: E402
from bot.llm.reader import entry_text_of, request_for, tldr_languages  # noqa: E402
from bot.themes import load_themes  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
LLM = FIXTURES / "llm"
MODEL = "recorded-eval"  # the model named in every recorded body (the replay serves any model name)


@dataclass(frozen=True)
class Source:
    feed: Path
    labels: Path
    themes: Path | None  # None: the packaged themes file


# held out: measured, never tuned on (tests/fixtures/llm/README.md)
SETS = {
    "heldout37-zh": Source(FIXTURES / "heldout37" / "rl-zh.xml", FIXTURES / "heldout37" / "labels.tsv", None),
    "heldout38-en": Source(FIXTURES / "heldout38" / "rl-en.xml", FIXTURES / "heldout38" / "labels.tsv", None),
    "bio-en": Source(FIXTURES / "fields" / "bio-en" / "bio-en.xml",
                     FIXTURES / "fields" / "bio-en" / "bio-en_labels.tsv", LLM / "sets" / "bio-themes.toml"),
    # dev sets: what a confidence threshold or the weighing of the readers may be chosen on
    "dev8-zh": Source(FIXTURES / "eval" / "dev8" / "rl-zh.xml", FIXTURES / "eval" / "dev8" / "labels.tsv", None),
    "dev-native-en": Source(FIXTURES / "eval" / "dev-native-en.xml", FIXTURES / "eval" / "dev-native-en_labels.tsv",
                            None),
}


def write_set(name: str, source: Source) -> int:
    """Copy one set's feed and labels, write its prompts; how many were written."""
    folder, prompts = LLM / "sets" / name, LLM / "prompts" / name
    folder.mkdir(parents=True, exist_ok=True)
    if prompts.exists():
        shutil.rmtree(prompts)
    prompts.mkdir(parents=True)
    shutil.copyfile(source.feed, folder / "feed.xml")
    shutil.copyfile(source.labels, folder / "labels.tsv")
    themes = load_themes(source.themes)
    parsed = parse((folder / "feed.xml").read_bytes(), f"https://{name}.example/feed.xml")
    index = []
    for n, entry in enumerate(parsed.entries, start=1):
        title, summary = entry_text_of(entry.title, entry.summary_text)
        body = request_for(MODEL, themes, title, summary, tldr_languages())
        (prompts / f"{n}.json").write_text(json.dumps(body, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        index.append({"n": n, "title": title, "published": entry.published.isoformat() if entry.published else None,
                      "hash": body_hash(body)})
    (folder / "index.json").write_text(json.dumps({"set": name, "themes": str(source.themes.relative_to(ROOT))
                                                   if source.themes else None, "entries": index},
                                                  ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return len(index)


def main(names: list[str]) -> int:
    for name in names or list(SETS):
        print(f"{name}: {write_set(name, SETS[name])} prompts")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
