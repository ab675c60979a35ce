"""Sections made from the entries' own shared terms, when no theme fits them.

Entries are clustered bottom-up (agglomerative, centroid linkage on unit
TF-IDF vectors): the two most similar clusters merge while their cosine
similarity is at least the threshold. Only clusters that share a term are
ever compared, so the cost follows the number of shared terms, not the square
of the entries. Ties break on the entries' keys, so the result never depends
on input order.

A cluster is named after two terms its members share, chosen for naming a
topic: shared by many of them, in their titles, rare in the feed and in
everyday language ("concurrency control / MVCC", "环境 / 沙盒"; not "models /
added"). Each member records the terms it shares, for ``--explain``.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bot.themes.common_words import specificity
from bot.themes.model import Item
from bot.themes.terms import CJK_CHAR_RE, Vocabulary, Weighted, one_chinese_word, one_latin_phrase, weigh

CLUSTER_THRESHOLD = 0.2  # cosine of two clusters' centroids needed to merge them
NAME_TERMS = 2  # terms in a derived section's name
COVERAGE_POWER = 3  # how much more a term all members share counts than one some share
TITLE_WEIGHT = 2.0  # a term in every member's title counts 3 times, in half of them 2 times ...
UNTITLED = 0.4  # ... and in none 0.4 times: titles state topics, summaries add verbs and generic words


@dataclass(frozen=True)
class Cluster:
    """A derived section: its members, its naming terms and what each member shares."""

    keys: tuple[str, ...]
    terms: tuple[str, ...]  # surface forms, the best naming term first
    shared: Mapping[str, tuple[str, ...]]  # member key -> surface forms of the terms it shares
    latin_terms: tuple[str, ...] = ()  # Latin-script terms of its name or its titles, for an English name

    @property
    def name(self) -> str:
        return " / ".join(self.terms)

    @property
    def name_en(self) -> str | None:
        """Named after shared terms in Latin script (GRPO, sandbox), if the members share any."""
        return " / ".join(self.latin_terms) if self.latin_terms else None


def _dot(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    if len(a) > len(b):
        a, b = b, a
    return sum(w * b[t] for t, w in a.items() if t in b)


def _norm(v: Mapping[str, float]) -> float:
    return math.sqrt(sum(w * w for w in v.values())) or 1.0


def cluster_items(
    items: Sequence[Item],
    vocab: Vocabulary,
    *,
    population: Sequence[Item] | None = None,
    background: Sequence[Item] = (),
    threshold: float | None = None,
    weighted: Weighted | None = None,
) -> list[Cluster]:
    """Clusters of two or more of ``items``.

    Term weights come from ``population`` (default: the items themselves; the
    whole week when clustering its leftovers) plus ``background``, the feed's
    history if the caller has it.
    """
    if len(items) < 2:
        return []
    threshold = CLUSTER_THRESHOLD if threshold is None else threshold
    weighted = weighted or weigh(population or items, vocab, background)
    keys = sorted(item.key for item in items)
    members: dict[int, list[str]] = {i: [k] for i, k in enumerate(keys)}
    sums: dict[int, dict[str, float]] = {i: dict(weighted.vectors.get(k, {})) for i, k in enumerate(keys)}
    norms = {i: _norm(v) for i, v in sums.items()}
    postings: dict[str, set[int]] = {}
    for i, vector in sums.items():
        for term in vector:
            postings.setdefault(term, set()).add(i)

    heap: list[tuple[float, int, int]] = []

    def push_pairs(i: int, candidates: set[int]) -> None:
        for j in sorted(candidates):
            if j == i or j not in members:
                continue
            sim = _dot(sums[i], sums[j]) / (len(members[i]) * len(members[j]))
            if sim >= threshold:
                heapq.heappush(heap, (-round(sim, 9), min(i, j), max(i, j)))

    for i in sorted(sums):
        push_pairs(i, {j for t in sums[i] for j in postings[t] if j > i})
    next_id = len(keys)
    while heap:
        _, i, j = heapq.heappop(heap)
        if i not in members or j not in members:
            continue
        merged = members.pop(i) + members.pop(j)
        vector = dict(sums.pop(i))
        for term, w in sums.pop(j).items():
            vector[term] = vector.get(term, 0.0) + w
        for term in vector:
            postings[term].discard(i)
            postings[term].discard(j)
            postings[term].add(next_id)
        members[next_id], sums[next_id], norms[next_id] = sorted(merged), vector, _norm(vector)
        push_pairs(next_id, {k for t in vector for k in postings[t]})
        next_id += 1
    texts = {item.key: item.title + " " + item.summary for item in items}
    clusters = [_named(tuple(m), weighted, vocab, texts) for m in members.values() if len(m) >= 2]
    return sorted(clusters, key=lambda c: (-len(c.keys), c.keys))


def _named(
    keys: tuple[str, ...], weighted: Weighted, vocab: Vocabulary, texts: Mapping[str, str]
) -> Cluster:
    """Name a cluster after the terms that best say what its members share.

    A term's weight is how many members share it (cubed: a term all four
    entries share beats one two of them do), its IDF over the week and the
    feed's history (a term the whole feed uses names no section), how often
    it is in the members' titles (titles state topics; summaries add verbs),
    and its specificity in everyday language (``bot.themes.common_words``:
    "models" or "added" say nothing even when every member has them). The
    second term may not repeat the first ("fuzzing / fuzzers").
    """
    present: dict[str, int] = {}
    in_title: dict[str, int] = {}
    for key in keys:
        found = weighted.terms[key]
        for term in found.counts:
            if term in weighted.idf and term in weighted.vectors[key]:
                present[term] = present.get(term, 0) + 1
                in_title[term] = in_title.get(term, 0) + (term in found.in_title)
    size = len(keys)

    def weight(term: str) -> float:
        titles = 1.0 + TITLE_WEIGHT * in_title[term] / size if in_title[term] else UNTITLED
        coverage = (present[term] / size) ** COVERAGE_POWER
        return coverage * weighted.idf[term] * titles * specificity(vocab.surface(term))

    ranked = sorted((t for t, n in present.items() if n >= 2), key=lambda t: (-round(weight(t), 9), t))
    chosen: list[str] = []
    written: dict[str, str] = {}  # a phrase joined from two terms, as the members write it
    for term in ranked:
        if any(_same_idea(term, c, vocab) for c in chosen):
            continue
        chosen.append(term)
        if len(chosen) == 2:
            member_texts = [texts[k] for k in keys]
            first, second = chosen
            joined = _known_phrase(first, second, keys, weighted) or one_chinese_word(first, second, member_texts)
            phrase = None if joined else one_latin_phrase(vocab.surface(first), vocab.surface(second), member_texts)
            if joined:  # a term of the feed's own: a second term may follow it
                chosen = [joined]
            elif phrase:  # a longer phrase as the members write it names the section alone
                chosen = [phrase.casefold()]
                written[chosen[0]] = phrase
                break
        if len(chosen) == NAME_TERMS:
            break
    shared = {
        key: tuple(vocab.surface(t) for t in ranked if t in weighted.terms[key].counts)[:4] for key in keys
    }

    def names_of(terms: list[str]) -> tuple[str, ...]:
        surfaces = [written.get(t) or vocab.surface(t) for t in terms]
        return tuple(_capitalised(s) if i == 0 else s for i, s in enumerate(surfaces))

    # a section named in Chinese is named in English after a Latin-script term of its titles ("GRPO"), if any:
    # one only in summaries is as often an author, a venue or a baseline ("Joachims", "CIKM", "BM25")
    latin = [t for t in chosen if t.isascii()] or [t for t in ranked if t.isascii() and in_title[t]][:1]
    return Cluster(keys, names_of(chosen), shared, names_of(latin))


def _known_phrase(first: str, second: str, keys: Sequence[str], weighted: Weighted) -> str | None:
    """Two single words that are one term of the members' somewhere ("collection", "garbage")."""
    if " " in first + second:
        return None
    known = {t for key in keys for t in weighted.terms[key].counts}
    return next((p for p in (f"{second} {first}", f"{first} {second}") if p in known), None)


def _same_idea(a: str, b: str, vocab: Vocabulary) -> bool:
    """Two terms that would name a section twice over: a shared word or
    four-letter stem ("collector", "collection"), one Chinese word inside the
    other, or an acronym of the other ("GC", "garbage collection")."""
    words_a, words_b = set(a.split()), set(b.split())
    if words_a & words_b:
        return True
    if CJK_CHAR_RE.search(a) or CJK_CHAR_RE.search(b):
        return a in b or b in a
    if {w[:4] for w in words_a if len(w) >= 4} & {w[:4] for w in words_b if len(w) >= 4}:
        return True
    for word, phrase in ((a, b), (b, a)):
        written, parts = vocab.surface(word), phrase.split()
        initials = "".join(part[0] for part in parts)
        if " " not in word and written[:1].isupper() and len(parts) >= 2 and written.casefold().startswith(initials):
            return True
    return False


def _capitalised(term: str) -> str:
    return term[:1].upper() + term[1:] if term[:1].islower() else term
