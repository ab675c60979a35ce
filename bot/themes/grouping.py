"""Lay out one week's entries as a few named sections.

1. **Score** every entry against every theme (``bot.themes.scoring``). An
   entry *fits* a theme when the score reaches ``min_score`` and the evidence
   is more than one word in passing: a keyword in the title, or two different
   keywords in the summary.
2. **Check the fit.** If fewer than ``min_fit`` of the feed's recent entries
   (the week's and about three weeks' worth before it) clearly fit a theme
   (twice ``min_score``: another field's entries reach a bare ``min_score`` on
   words in passing like "code" or "memory"), the themes file was written for
   another feed: the whole week is grouped by shared terms instead (step 5),
   and the result says so. Fit is the feed's, not one week's (``_feed_fit``).
2a. **The learned model** (``bot.themes.learned``, for the themes it was
   trained on) reads every word of every entry, and its sentence vector where
   it has one, and adds points to the themes its keywords name, in proportion
   to its probability (``_learn``).
2b. **The feed's own words** settle what keywords leave undecided: an
   entry not clearly and decisively in one theme gains points for the terms
   it shares with each theme's clear entries (``bot.themes.affinity``).
3. **Place** each fitting entry in its best theme's section, even when it is
   alone there: a lone entry keeps its named theme as long as the week stays
   within ``max_sections`` (step 6 decides otherwise). One theme, one section:
   an entry on a theme never lands in a second, differently named section.
4. **Weak evidence.** An entry below ``min_score`` joins a theme's section
   that exists this week when its keywords lean plainly that way: at least
   half of ``min_score`` there and 1.5 times any other theme (``_weak_home``).
5. **Derive** sections among the rest from shared distinctive terms
   (``bot.themes.derive``). A derived cluster whose members together score
   ``min_score`` on one theme becomes that theme's section instead, so the
   same topic never appears under two names.
6. **Cap** at ``max_sections`` (the catch-all counts): the section that costs
   least to dissolve goes first (one whose entries all have another theme in
   the week, then the smallest and weakest); its entries move to their next
   best theme still there, else to the catch-all, which is always last.

Sorting uses stable keys (item key, theme file order, terms), so the same
entries give the same sections in any order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from bot.themes.affinity import MAX_HISTORY, exemplar_theme, theme_affinity
from bot.themes.derive import Cluster, cluster_items
from bot.themes.learned import LearnedModel, Reading, WordModel, model_for
from bot.themes.model import FIT_MARGIN, Explanation, Fit, Group, Item, Reason, ThemeScore, ThemeSet
from bot.themes.scoring import best_theme, lexicon, normalise_text, score_details
from bot.themes.terms import Vocabulary

AFFINITY_WEIGHT = 3.0  # similarity 1 to a theme's profile is worth this many x min_score
SECONDARY_RATIO = 0.5  # a fallback theme must score at least this share of the best one
WEAK_RATIO = 0.5  # share of min_score with which an entry joins a theme already in the week
# Probability 1 from the learned word model is worth this many x min_score, and MIXED_WEIGHT
# where the entry's sentence vector is mixed in. Grouped leave-one-source-out over 51 sets
# (scripts/train_theme_model.py --cross-validate, 2,674 entries): words alone 0.801 at 3, 0.807 at 5, 0.805 at 7; mixed
# 0.824 at 4, 0.829 at 6, 0.830 at 8, 0.827 at 10. The sets written after the keywords, whose
# keywords never saw them, say most: mixed 0.800 at 4, 0.817 at 8. Keywords are what an
# operator can read and edit, but on papers nobody tuned them on the models know more.
LEARNED_WEIGHT = 5.0
MIXED_WEIGHT = 8.0
LEARNED_SURE = 0.5  # from this probability the model's word counts as evidence without a keyword
FIT_HISTORY_WEEKS = 3  # the fit is judged on the week and about this many weeks of the feed before it


@dataclass(frozen=True)
class Grouping:
    """A week laid out: its sections, and how well the themes file fits it."""

    groups: list[Group]
    fit: Fit


@dataclass
class _Entry:
    item: Item
    details: tuple[ThemeScore, ...]
    scores: tuple[float, ...]
    best: int
    fits: bool
    reason: Reason = "no_theme"
    shared_terms: tuple[str, ...] = ()
    bonus: tuple[float, ...] = ()  # points from the feed's own usage (``_refine``), per theme
    feed_terms: tuple[str, ...] = ()  # the terms behind the best theme's bonus
    moved: bool = False  # the bonus changed its best theme
    learned: tuple[float, ...] = ()  # points from the learned word model (``_learn``), per theme
    learned_moved: bool = False  # those points changed its best theme
    reading: Reading | None = None


@dataclass
class _Section:
    """A section while the week is laid out: a theme (index) or a derived cluster."""

    theme: int | None
    entries: list[_Entry]
    cluster: Cluster | None = None
    strength: float = field(default=0.0)

    def total(self) -> float:
        if self.theme is None:
            return 0.0
        return sum(e.scores[self.theme] for e in self.entries)


def _evidence(detail: ThemeScore) -> bool:
    """A title keyword, or two different summary keywords, not after a contrast cue."""
    plain = [hit for hit in detail.hits if not hit.discounted]
    if any(hit.field == "title" for hit in plain):
        return True
    return len({normalise_text(hit.term) for hit in plain}) >= 2


def _score(item: Item, themes: ThemeSet, lex: Any = None) -> _Entry:
    details = score_details(item, themes, lex)
    scores = tuple(d.score for d in details)
    best = best_theme(scores)
    fits = scores[best] >= themes.min_score and _evidence(details[best])
    return _Entry(item, details, scores, best, fits)


def _clear(entry: _Entry, themes: ThemeSet) -> bool:
    return entry.fits and entry.scores[entry.best] >= FIT_MARGIN * themes.min_score


def theme_fit(items: Sequence[Item], themes: ThemeSet) -> Fit:
    """How many of ``items`` clearly fit some theme of ``themes``."""
    lex = lexicon(themes)
    matched = sum(_clear(_score(item, themes, lex), themes) for item in items)
    return Fit(entries=len(items), matched=matched, min_fit=themes.min_fit)


@lru_cache(maxsize=8)
def _phrases(themes: ThemeSet) -> frozenset[str]:
    """The themes' Chinese keywords, which jieba should not split."""
    return frozenset(
        k.strip("* ") for t in themes.themes for k in (*t.strong_keywords, *t.keywords, *t.weak_keywords)
    )


def group_items(items: Sequence[Item], themes: ThemeSet, *, history: Sequence[Item] = ()) -> list[Group]:
    """Group one week's items into at most ``themes.max_sections`` sections."""
    return group_week(items, themes, history=history).groups


def group_week(
    items: Sequence[Item], themes: ThemeSet, *, history: Sequence[Item] = (),
    model: LearnedModel | WordModel | bool | None = True,
) -> Grouping:
    """Group one week's items, and say whether the themes file fits them.

    ``history`` (the feed's earlier stored entries, oldest first, optional)
    informs how common a word is in this feed, for sections made from shared
    terms, and its most recent ``MAX_HISTORY`` entries join the themes'
    profiles from the feed's own words (``_refine``). It never decides an
    entry's theme on its own: only the week's entries are placed.
    """
    if not items:
        return Grouping([], Fit(0, 0, themes.min_fit))
    ordered = sorted(items, key=lambda item: item.key)
    for first, second in zip(ordered, ordered[1:], strict=False):
        if first.key == second.key:
            raise ValueError(f"duplicate item key {first.key!r}: every item needs its own key")
    lex = lexicon(themes)
    entries = [_score(item, themes, lex) for item in ordered]
    past = _PastScores(themes, lex)
    fit = _feed_fit(entries, history, themes, past)
    vocab = Vocabulary(_phrases(themes))
    if fit.fits:
        _learn(entries, themes, model_for(themes, model))
        _refine(entries, history, themes, vocab, past)
    if not fit.fits:
        sections, catch_all = _by_terms(entries, ordered, vocab, history)
    else:
        sections, catch_all = _by_themes(entries, ordered, vocab, themes, history)
    sections, catch_all = _enforce_cap(sections, catch_all, themes)
    return Grouping(_render(sections, catch_all, themes), fit)


class _PastScores:
    """Keyword scores of the feed's earlier entries, each scored once per grouping: the fit
    (``_feed_fit``) and the themes' profiles (``_refine``) both read the latest of them."""

    def __init__(self, themes: ThemeSet, lex: Any) -> None:
        self._themes, self._lex = themes, lex
        self._scored: dict[str, _Entry] = {}

    def __call__(self, item: Item) -> _Entry:
        entry = self._scored.get(item.key)
        if entry is None:
            entry = self._scored[item.key] = _score(item, self._themes, self._lex)
        return entry


def _feed_fit(entries: list[_Entry], history: Sequence[Item], themes: ThemeSet, past: _PastScores) -> Fit:
    """Whether the themes file fits the feed, judged on the week's entries and the feed's latest
    ones before it (``FIT_HISTORY_WEEKS`` times as many as the week has).

    Fit belongs to the feed, not to one week: a security feed whose week happens to use the RL
    themes' security words would otherwise get RL sections that week and sections from shared
    terms the next, and a quiet RL week with few keyword hits would lose its themes."""
    own = {entry.item.key for entry in entries}
    before = [item for item in history if item.key not in own]
    recent = before[max(0, len(before) - FIT_HISTORY_WEEKS * len(entries)):]
    matched = sum(_clear(entry, themes) for entry in entries)
    matched += sum(_clear(past(item), themes) for item in recent)
    return Fit(len(entries) + len(recent), matched, themes.min_fit)


def _learn(entries: list[_Entry], themes: ThemeSet, model: LearnedModel | None) -> None:
    """Let the learned model weigh in on every entry, among the themes its keywords name.

    The learned model is the word model, mixed with the sentence model for an
    entry that carries a sentence vector (``bot.themes.learned.LearnedModel``).

    Each entry gets, for each theme its keywords name, ``LEARNED_WEIGHT x
    min_score x`` the model's probability (``MIXED_WEIGHT`` with a sentence
    vector) on top of its keyword score; there a
    probability of at least ``LEARNED_SURE`` counts as evidence, like a keyword
    in the title. An entry its keywords put clearly in one theme is weighed too:
    a paper's domain words (robots, code, the web) often outscore what it
    contributes, and the model, trained on what labellers chose, hears the
    contribution (cross-validated over 17 labelled sources, mean F1 0.794 when
    such entries kept their keyword theme, 0.803 when the model weighed them).
    Themes no keyword names get nothing: the model knows only the themes it was
    trained on, and would file an entry on protein folding under one of them.
    For the same reason an entry whose keywords lead to a theme the model was
    never taught (an operator's own theme added to the bundled file) is left as
    its keywords put it: the model has no vote for that theme, so its points
    could only pull the entry away.
    """
    if model is None:
        return
    taught = set(model.theme_keys)
    for entry in entries:
        if themes.themes[entry.best].key not in taught:
            continue
        reading = model.read(entry.item, themes)
        named = [p if score > 0 else 0.0 for p, score in zip(reading.probabilities, entry.scores, strict=True)]
        weight = LEARNED_WEIGHT if reading.sentence is None else MIXED_WEIGHT
        points = tuple(weight * themes.min_score * p for p in named)
        scores = tuple(score + extra for score, extra in zip(entry.scores, points, strict=True))
        best = best_theme(scores)
        entry.learned_moved = best != entry.best
        entry.reading, entry.learned, entry.scores, entry.best = reading, points, scores, best
        entry.fits = scores[best] >= themes.min_score and (
            _evidence(entry.details[best]) or named[best] >= LEARNED_SURE
        )


def _refine(
    entries: list[_Entry], history: Sequence[Item], themes: ThemeSet, vocab: Vocabulary, past: _PastScores
) -> None:
    """Let the feed's own usage decide entries its keywords leave undecided.

    Each theme's profile is the distinctive terms of the entries (this week's
    and the feed's recent history) whose keywords put them clearly and
    decisively in it (``bot.themes.affinity``). Every other entry gets, per
    theme, ``AFFINITY_WEIGHT x min_score x`` its similarity to that profile
    on top of its keyword score, for the themes its keywords name (any theme
    when its keywords fit none): a near tie between two themes goes to the
    one whose entries it resembles, and an entry short of keywords can reach
    the theme whose vocabulary it shares.
    """
    clear = FIT_MARGIN * themes.min_score
    recent = [past(item) for item in list(history)[-MAX_HISTORY:]]
    labelled = [(e.item, exemplar_theme(e.scores, clear)) for e in (*entries, *recent)]
    affinity = theme_affinity([e.item for e in entries], labelled, len(themes.themes), vocab)
    for entry in entries:
        if exemplar_theme(entry.scores, clear) is not None:
            continue
        similarity = affinity.similarity[entry.item.key]
        # an entry that fits by keywords only chooses among the themes its keywords name
        bonus = tuple(
            AFFINITY_WEIGHT * themes.min_score * sim if score > 0 or not entry.fits else 0.0
            for sim, score in zip(similarity, entry.scores, strict=True)
        )
        scores = tuple(score + extra for score, extra in zip(entry.scores, bonus, strict=True))
        best = best_theme(scores)
        entry.bonus = bonus
        entry.scores = scores
        if best != entry.best:
            entry.best = best
            entry.fits = scores[best] >= themes.min_score
            entry.moved = True
        entry.feed_terms = affinity.shared[entry.item.key].get(best, ())


def _by_themes(
    entries: list[_Entry], week: Sequence[Item], vocab: Vocabulary, themes: ThemeSet, history: Sequence[Item]
) -> tuple[list[_Section], list[_Entry]]:
    by_theme: dict[int, _Section] = {}
    rest: list[_Entry] = []
    for entry in entries:
        if entry.fits:
            entry.reason = "feed_terms" if entry.moved else "learned" if entry.learned_moved else "best_theme"
            by_theme.setdefault(entry.best, _Section(entry.best, [])).entries.append(entry)
        else:
            rest.append(entry)
    _fold_small(by_theme, rest, themes)
    leftovers = []
    for entry in rest:
        home = _weak_home(entry, themes)
        if home in by_theme:
            entry.reason = "weak_theme"
            by_theme[home].entries.append(entry)
        else:
            leftovers.append(entry)
    derived: list[_Section] = []
    catch_all: list[_Entry] = []
    by_key = {entry.item.key: entry for entry in leftovers}
    taken: set[str] = set()
    for cluster in cluster_items([e.item for e in leftovers], vocab, population=week, background=history):
        members = [by_key[k] for k in cluster.keys]
        theme = _cluster_theme(members, themes)
        if theme is not None:
            for entry in members:
                entry.reason = "weak_theme"
            by_theme.setdefault(theme, _Section(theme, [])).entries.extend(members)
        else:
            for entry in members:
                entry.reason, entry.shared_terms = "shared_terms", cluster.shared[entry.item.key]
            derived.append(_Section(None, members, cluster))
        taken.update(cluster.keys)
    catch_all = [entry for entry in leftovers if entry.item.key not in taken]
    return [*by_theme.values(), *derived], catch_all


def _fold_small(by_theme: dict[int, _Section], rest: list[_Entry], themes: ThemeSet) -> None:
    """Honour ``min_section_size`` > 1: fold the smallest sections into their
    entries' next-best theme in the week, or leave them for derived sections."""
    while True:
        small = [t for t, s in by_theme.items() if len(s.entries) < themes.min_section_size]
        if not small:
            return
        victim = min(small, key=lambda t: (len(by_theme[t].entries), by_theme[t].total(), -t))
        for entry in by_theme.pop(victim).entries:
            target = _fallback(entry, [t for t in by_theme], themes)
            if target is None:
                entry.reason = "no_theme"
                rest.append(entry)
            else:
                entry.reason = "fallback_theme"
                by_theme[target].entries.append(entry)


def _weak_home(entry: _Entry, themes: ThemeSet) -> int | None:
    """The theme an entry below ``min_score`` leans to, if its keywords say so plainly.

    The same test as for a profile's exemplars (``exemplar_theme``: ``DECISIVE_RATIO``
    times the next theme), at ``WEAK_RATIO x min_score``. Only its keywords
    count: points from the feed's own words settle close calls between themes
    an entry fits, and on dev weeks they sent every weak entry they touched to
    a section it did not belong in. An entry without a plain lean goes on to
    the derived sections or the catch-all, where it costs the sections no precision.
    """
    return exemplar_theme([detail.score for detail in entry.details], WEAK_RATIO * themes.min_score)


def _cluster_theme(members: Sequence[_Entry], themes: ThemeSet) -> int | None:
    """The theme a derived cluster is really about: every member scores on it
    and together they reach ``min_score``."""
    totals = [sum(e.scores[t] for e in members) for t in range(len(themes.themes))]
    best = best_theme(totals)
    if totals[best] >= themes.min_score and all(e.scores[best] > 0 for e in members):
        return best
    return None


def _by_terms(
    entries: list[_Entry], week: Sequence[Item], vocab: Vocabulary, history: Sequence[Item]
) -> tuple[list[_Section], list[_Entry]]:
    """The whole week clustered by shared terms: the themes file does not fit it."""
    by_key = {entry.item.key: entry for entry in entries}
    sections = []
    taken: set[str] = set()
    for cluster in cluster_items(week, vocab, background=history):
        members = [by_key[k] for k in cluster.keys]
        for entry in members:
            entry.reason, entry.shared_terms = "themes_do_not_fit", cluster.shared[entry.item.key]
        sections.append(_Section(None, members, cluster))
        taken.update(cluster.keys)
    return sections, [entry for entry in entries if entry.item.key not in taken]


def _fallback(entry: _Entry, open_themes: Sequence[int], themes: ThemeSet) -> int | None:
    """The best other theme still in the week where the entry scores decently."""
    floor = max(themes.min_score, SECONDARY_RATIO * entry.scores[entry.best])
    candidates = [t for t in open_themes if t != entry.best and entry.scores[t] >= floor]
    return min(candidates, key=lambda t: (-entry.scores[t], t)) if candidates else None


def _enforce_cap(
    sections: list[_Section], catch_all: list[_Entry], themes: ThemeSet
) -> tuple[list[_Section], list[_Entry]]:
    """Dissolve sections until the week fits ``max_sections`` (catch-all included)."""
    sections = list(sections)
    catch_all = list(catch_all)
    while sections and len(sections) + (1 if catch_all else 0) > themes.max_sections:
        kept_themes = [s.theme for s in sections if s.theme is not None]
        victim = min(sections, key=lambda section: _dissolve_cost(section, kept_themes, themes))
        sections.remove(victim)
        kept = {s.theme: s for s in sections if s.theme is not None}
        for entry in victim.entries:
            target = _fallback(entry, sorted(kept), themes)
            if target is None:
                entry.reason, entry.shared_terms = "over_cap", ()
                catch_all.append(entry)
            else:
                entry.reason = "fallback_theme"
                kept[target].entries.append(entry)
    for section in sections:
        if section.theme is not None and len(section.entries) == 1 and section.entries[0].reason == "best_theme":
            section.entries[0].reason = "lone_theme"
    return sections, catch_all


def _dissolve_cost(
    section: _Section, kept_themes: Sequence[int], themes: ThemeSet
) -> tuple[bool, int, int, float, int, str]:
    """Which section goes first: one whose entries all have another theme in the
    week, then the smallest, derived before themed, the weakest, the later in the file."""
    others = [t for t in kept_themes if t != section.theme]
    stranded = any(_fallback(e, others, themes) is None for e in section.entries)
    derived = section.theme is None
    name = section.cluster.name if section.cluster else ""
    order = section.theme if section.theme is not None else 0
    return (stranded, len(section.entries), 0 if derived else 1, section.total(), -order, name)


def _explain(entry: _Entry, theme_key: str | None) -> Explanation:
    top = sorted((d for d in entry.details if d.score > 0), key=lambda d: -d.score)[:3]
    index = next((i for i, d in enumerate(entry.details) if d.theme_key == theme_key), None)
    points = entry.bonus[index] if entry.bonus and index is not None else 0.0
    learned = entry.learned[index] if entry.learned and index is not None else 0.0
    words = entry.reading.words[index] if entry.reading and index is not None else ()
    sentence = entry.reading.sentence if entry.reading else None
    votes = entry.reading.votes if entry.reading else None
    return Explanation(
        entry.item.key, entry.reason, theme_key, tuple(top), entry.shared_terms,
        feed_points=round(points, 2), feed_terms=entry.feed_terms if points else (),
        learned_points=round(learned, 2), learned_words=words if learned else (),
        learned_sentence=round(sentence[index], 2) if learned and sentence and index is not None else None,
        learned_votes=(votes[index], sum(votes)) if learned and votes and index is not None else None,
    )


def _by_title(entry: _Entry) -> tuple[str, str]:
    return (normalise_text(entry.item.title), entry.item.key)


def _render(sections: Sequence[_Section], catch_all: Sequence[_Entry], themes: ThemeSet) -> list[Group]:
    """Largest sections first (ties: file order, then derived by name); catch-all last."""

    def order(section: _Section) -> tuple[int, int, int, str]:
        if section.theme is None:
            return (-len(section.entries), 1, 0, section.cluster.name if section.cluster else "")
        return (-len(section.entries), 0, section.theme, "")

    groups = []
    for section in sorted(sections, key=order):
        if section.theme is None:
            assert section.cluster is not None
            entries = sorted(section.entries, key=_by_title)
            cluster = section.cluster
            groups.append(
                Group(
                    name=cluster.name,
                    name_en=cluster.name_en,
                    description="",
                    catch_all=False,
                    keys=tuple(e.item.key for e in entries),
                    theme_key=None,
                    kind="derived",
                    terms=cluster.terms,
                    explanations=tuple(_explain(e, None) for e in entries),
                )
            )
            continue
        theme_index = section.theme
        theme = themes.themes[theme_index]
        entries = sorted(section.entries, key=lambda e: (-e.scores[theme_index], *_by_title(e)))
        groups.append(
            Group(
                name=theme.name,
                name_en=theme.name_en,
                description=theme.description,
                catch_all=False,
                keys=tuple(e.item.key for e in entries),
                theme_key=theme.key,
                kind="theme",
                names={themes.language: theme.name, **theme.names},
                explanations=tuple(_explain(e, theme.key) for e in entries),
            )
        )
    if catch_all:
        entries = sorted(catch_all, key=_by_title)
        names = {themes.language: themes.catch_all_name} if themes.catch_all_name else {}
        if themes.catch_all_name_en:
            names["en"] = themes.catch_all_name_en
        groups.append(
            Group(
                name=themes.catch_all_name or "",
                name_en=themes.catch_all_name_en,
                description=themes.catch_all_description,
                catch_all=True,
                keys=tuple(e.item.key for e in entries),
                theme_key=None,
                kind="catch_all",
                names=names,
                explanations=tuple(_explain(e, None) for e in entries),
            )
        )
    return groups
