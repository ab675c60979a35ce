#!/usr/bin/env python3
"""Write bot/data/common_words.json.gz: how common each everyday English and Chinese word is.

Derived sections are named after the terms their entries share (``bot.themes.derive``).
A word every text uses ("added", "models", "网络") says nothing about a section's topic
even when all its entries share it, so names weigh a term by how rare it is in general
language. The rarity comes from wordfreq's Zipf frequencies (log10 of a word's
frequency per billion words, 7 for "the", 3 for "compiler"); only words at or above
``MIN_ZIPF`` are kept, as the rest all count as specific. Run by hand, never by the
package or its tests; wordfreq comes with the training tools:

    .venv/bin/pip install '.[train]'
    .venv/bin/python scripts/make_common_words.py

The word list is wordfreq's data, redistributed under CC BY-SA 4.0 (see the file's
"license" field).
"""

from __future__ import annotations

import gzip
import json
import math
from importlib.metadata import version
from pathlib import Path

MIN_ZIPF = 3.5  # rarer words all count as specific (bot.themes.common_words.SPECIFIC_BELOW)
OUT = Path(__file__).resolve().parent.parent / "bot" / "data" / "common_words.json.gz"


def main() -> None:
    import wordfreq

    table: dict[str, dict[str, int]] = {}
    for language in ("en", "zh"):
        words = {}
        for word, frequency in wordfreq.get_frequency_dict(language).items():
            zipf = math.log10(frequency * 1e9)
            if zipf >= MIN_ZIPF:
                words[word] = round(zipf * 100)
        table[language] = dict(sorted(words.items()))
    data = {
        "source": f"wordfreq {version('wordfreq')} Zipf frequencies x 100, words at or above {MIN_ZIPF}",
        "license": "CC BY-SA 4.0 (https://creativecommons.org/licenses/by-sa/4.0/), data of the wordfreq "
                   "project (https://github.com/rspeer/wordfreq) and its sources",
        "zipf": table,
    }
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    with gzip.GzipFile(OUT, "wb", mtime=0) as out:  # mtime 0: the same words give the same bytes
        out.write(text.encode("utf-8"))
    print(f"wrote {OUT} ({OUT.stat().st_size // 1024} KB): " +
          ", ".join(f"{lang} {len(words)} words" for lang, words in table.items()))


if __name__ == "__main__":
    main()
