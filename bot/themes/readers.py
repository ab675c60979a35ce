"""The readers: pure functions that each say, for one entry, how many points every theme earns.

A reader is ``reader(item, context) -> Vote``. It reads the entry and what the caller prepared
for the feed (``Context``) and never sees another reader's vote; ``bot.themes.weigh`` adds the
votes up. A new reader (a language model, say) is a function appended to ``READERS``: the
weighing and the layout never know which readers ran.

- ``keywords``: the themes file's keywords (``bot.themes.scoring``); what an operator writes.
- ``words``: the theme pack's learned word model (``bot.themes.learned``), for the themes it
  was trained on.
- ``feed``: how this feed writes about each theme: the terms shared with the theme's own text
  (name, description, keywords) and with the feed's entries that keywords place clearly.
- ``editor``: entries the editor moved by hand in earlier weeks (``EditorLabel``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from bot.themes.learned import WordModel, shipped_model
from bot.themes.model import FIT_MARGIN, Item, ThemeScore, ThemeSet
from bot.themes.scoring import lexicon, normalise_text, score_details
from bot.themes.terms import Vocabulary, Weighted, weigh
from bot.themes.vote import Vote

WORDS_WEIGHT = 5.0  # probability 1 from the word model is worth this many x min_score
FEED_WEIGHT = 3.0  # similarity 1 to a theme's profile is worth this many x min_score
EDITOR_WEIGHT = 4.0  # similarity 1 to an entry the editor moved is worth this many x min_score
EDITOR_MIN_SIMILARITY = 0.25  # below this an editor's label says nothing about an entry
DECISIVE_RATIO = 1.5  # a clear entry's best keyword score is at least this times its second best
MAX_HISTORY = 300  # the feed's most recent entries that join the theme profiles


@dataclass(frozen=True)
class EditorLabel:
    """An entry the editor placed by hand: ``draft move`` to a theme, or ``exclude`` (``theme_key``
    None), in ``week``. It is kept as text so it outlives the entry."""

    title: str
    summary: str
    theme_key: str | None
    week: str
    feed: str = ""


@dataclass(frozen=True)
class Context:
    """What the readers may read besides the entry: the themes, the feed's week and history,
    the editor's labels, and ``extra`` (per reader name, per item key: data the caller loaded
    before grouping, e.g. a language model's cached answers). Derived tables are computed once,
    on first use, and never change."""

    themes: ThemeSet
    week: tuple[Item, ...]
    history: tuple[Item, ...] = ()
    labels: tuple[EditorLabel, ...] = ()
    extra: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    model: WordModel | None = None  # the theme pack's word model, when it knows these themes

    @cached_property
    def vocab(self) -> Vocabulary:
        return Vocabulary(
            k.strip("* ") for t in self.themes.themes for k in (*t.strong_keywords, *t.keywords, *t.weak_keywords))

    @cached_property
    def _lexicon(self) -> object:
        return lexicon(self.themes)

    def keyword_scores(self, item: Item) -> tuple[ThemeScore, ...]:
        """The keyword scores of ``item``, scored once per context."""
        cache = self._keyword_cache
        found = cache.get(item.key)
        if found is None:
            found = cache[item.key] = score_details(item, self.themes, self._lexicon)  # type: ignore[arg-type]
        return found

    @cached_property
    def _keyword_cache(self) -> dict[str, tuple[ThemeScore, ...]]:
        return {}

    def clear_theme(self, item: Item) -> int | None:
        """The theme ``item``'s keywords put it in clearly and decisively, if any."""
        return clear_theme([s.score for s in self.keyword_scores(item)], FIT_MARGIN * self.themes.min_score)

    @cached_property
    def recent(self) -> tuple[Item, ...]:
        own = {item.key for item in self.week}
        return tuple(item for item in self.history[-MAX_HISTORY:] if item.key not in own)

    @cached_property
    def weighted(self) -> Weighted:
        """TF-IDF vectors of the week, the recent history, each theme's own text and the labels."""
        return weigh([*self.week, *self.recent, *self._theme_items, *self._label_items], self.vocab, max_terms=32)

    @cached_property
    def _theme_items(self) -> tuple[Item, ...]:
        return tuple(
            Item(f"\0theme:{t.key}", f"{t.name} {t.name_en or ''}",
                 " ".join((t.description, *t.strong_keywords, *t.keywords, *t.keywords)))
            for t in self.themes.themes)

    @cached_property
    def _label_items(self) -> tuple[Item, ...]:
        return tuple(Item(f"\0label:{i}", label.title, label.summary) for i, label in enumerate(self.labels))

    @cached_property
    def profiles(self) -> dict[str, dict[str, float]]:
        """Per theme key: the summed term vectors of its own text and of the feed's clear entries."""
        vectors = self.weighted.vectors
        profiles: dict[str, dict[str, float]] = {t.key: {} for t in self.themes.themes}
        for theme in self.themes.themes:
            _add(profiles[theme.key], vectors.get(f"\0theme:{theme.key}", {}))
        for item in (*self.week, *self.recent):
            clear = self.clear_theme(item)
            if clear is not None:
                _add(profiles[self.themes.themes[clear].key], vectors.get(item.key, {}))
        return profiles


def _add(into: dict[str, float], vector: Mapping[str, float], sign: float = 1.0) -> None:
    for term, weight in vector.items():
        into[term] = into.get(term, 0.0) + sign * weight


def clear_theme(scores: Sequence[float], clear_score: float) -> int | None:
    """The index of the theme scored at least ``clear_score`` and ``DECISIVE_RATIO`` times the next."""
    ranked = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    if not ranked:
        return None
    second = scores[ranked[1]] if len(ranked) > 1 else 0.0
    best = ranked[0]
    return best if scores[best] >= clear_score and scores[best] >= DECISIVE_RATIO * second else None


Reader = Callable[[Item, Context], Vote]


def keywords(item: Item, context: Context) -> Vote:
    """The themes file's keywords: each hit's points, title hits weighing most."""
    points, reasons = {}, {}
    for score in context.keyword_scores(item):
        if score.score > 0:
            points[score.theme_key] = score.score
            reasons[score.theme_key] = ", ".join(f"{hit.term} [{hit.field}]" for hit in score.hits[:4])
    return Vote("keywords", points, reasons)


def _named(item: Item, context: Context) -> set[str]:
    """The themes the entry's keywords name at all: the learned readers choose among these, since
    a learned model knows only its own field and would file anything under one of its themes."""
    return {s.theme_key for s in context.keyword_scores(item) if s.score > 0}


def words(item: Item, context: Context) -> Vote:
    """The word model's probabilities, for the themes the entry's keywords name."""
    model = context.model
    if model is None:
        return Vote("words")
    named = _named(item, context)
    best = max(context.keyword_scores(item), key=lambda s: s.score)
    if best.theme_key not in model.theme_keys:
        return Vote("words")  # an operator's own theme: the model has no say on it
    reading = model.read(item, context.themes)
    weight = WORDS_WEIGHT * context.themes.min_score
    points, reasons = {}, {}
    for theme, p, top in zip(context.themes.themes, reading.probabilities, reading.words, strict=True):
        if theme.key in named and p > 0:
            points[theme.key] = round(weight * p, 3)
            reasons[theme.key] = f"p={p:.2f} ({', '.join(top) or 'no word in particular'})"
    return Vote("words", points, reasons)


def feed(item: Item, context: Context) -> Vote:
    """Similarity to each theme's profile (its own text and the feed's clear entries), for an
    entry its keywords do not place clearly; leave-one-out, so an entry never votes for itself."""
    if context.clear_theme(item) is not None:
        return Vote("feed")
    vector = context.weighted.vectors.get(item.key, {})
    scores = context.keyword_scores(item)
    placed = max(s.score for s in scores) >= context.themes.min_score if scores else False
    named = _named(item, context)
    weight = FEED_WEIGHT * context.themes.min_score
    points, reasons = {}, {}
    for key, profile in context.profiles.items():
        if placed and key not in named:
            continue
        norm = math.sqrt(sum(w * w for w in profile.values()))
        if not norm:
            continue
        shared = {t: w * profile[t] for t, w in vector.items() if profile.get(t, 0.0) > 1e-9}
        similarity = sum(shared.values()) / norm
        if similarity > 0:
            points[key] = round(weight * similarity, 3)
            top = sorted(shared, key=lambda t: -shared[t])[:4]
            reasons[key] = "shares " + ", ".join(context.vocab.surface(t) for t in top)
    return Vote("feed", points, reasons)


def editor(item: Item, context: Context) -> Vote:
    """Entries like one the editor moved follow it: points for the theme of each similar label."""
    if not context.labels:
        return Vote("editor")
    vectors = context.weighted.vectors
    vector = vectors.get(item.key, {})
    names = {t.key: t.name for t in context.themes.themes}
    best: dict[str, tuple[float, EditorLabel]] = {}
    for i, label in enumerate(context.labels):
        if label.theme_key not in names or normalise_text(label.title) == normalise_text(item.title):
            continue
        other = vectors.get(f"\0label:{i}", {})
        similarity = sum(w * other[t] for t, w in vector.items() if t in other)
        if similarity >= EDITOR_MIN_SIMILARITY and similarity > best.get(label.theme_key, (0.0, label))[0]:
            best[label.theme_key] = (similarity, label)
    weight = EDITOR_WEIGHT * context.themes.min_score
    points = {key: round(weight * sim, 3) for key, (sim, _) in best.items()}
    reasons = {key: f"like '{label.title}', which the editor put in {names[key]} in {label.week}"
               for key, (_, label) in best.items()}
    return Vote("editor", points, reasons)


READERS: tuple[Reader, ...] = (keywords, words, feed, editor)


def model_for(themes: ThemeSet, use: bool | WordModel | None = True) -> WordModel | None:
    """The word model to read ``themes`` with: the shipped one when ``use`` is True, the one
    given, or none; none when it was not trained on every one of these themes."""
    model = shipped_model() if use is True else use or None
    return model if model is not None and model.applies_to(themes) else None
