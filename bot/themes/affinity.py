"""What the feed itself says a theme is about: terms shared with its clear entries.

The themes file's keywords are written once, in the words of the entries their
author read; next week's entries, another writer or another language phrase the
same topics differently. The entries that *clearly* fit a theme (many keyword
points, well ahead of the next theme) show how this feed writes about it: their
distinctive terms (TF-IDF over the week and the feed's recent history) form the
theme's profile. An entry whose keywords leave it undecided between themes, or
short of any, is then also measured by how much of its own vocabulary it shares
with each theme's profile.

Nothing here is tuned per entry or per feed: the profile is rebuilt from the
entries at hand every time, so it follows the feed as it changes, and an entry
never counts towards its own profile (its similarity is measured leave-one-out).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from bot.themes.model import Item
from bot.themes.terms import Vocabulary, weigh

DECISIVE_RATIO = 1.5  # an exemplar's best keyword score is at least this times its second best
MAX_HISTORY = 300  # most recent history entries used for profiles (keeps a week under a second)


@dataclass(frozen=True)
class Affinity:
    """Per item key: cosine similarity to each theme's profile, and the terms behind the best."""

    similarity: dict[str, tuple[float, ...]]
    shared: dict[str, dict[int, tuple[str, ...]]]


def exemplar_theme(scores: Sequence[float], clear_score: float) -> int | None:
    """The theme an entry clearly and decisively belongs to, by keywords alone, if any."""
    ranked = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    best = ranked[0]
    second = scores[ranked[1]] if len(ranked) > 1 else 0.0
    if scores[best] >= clear_score and scores[best] >= DECISIVE_RATIO * second:
        return best
    return None


def theme_affinity(
    week: Sequence[Item],
    labelled: Sequence[tuple[Item, int | None]],
    theme_count: int,
    vocab: Vocabulary,
) -> Affinity:
    """Similarity of each of ``week``'s items to every theme's profile.

    ``labelled`` holds every item that may serve as an exemplar (the week's and
    the history's), each with its exemplar theme or ``None``.
    """
    items = list({item.key: item for item in (*week, *(i for i, _ in labelled))}.values())
    weighted = weigh(items, vocab, max_terms=32)
    profiles: list[dict[str, float]] = [{} for _ in range(theme_count)]
    members: dict[str, int] = {}
    for item, theme in labelled:
        if theme is None or item.key in members:
            continue
        members[item.key] = theme
        for term, weight in weighted.vectors.get(item.key, {}).items():
            profiles[theme][term] = profiles[theme].get(term, 0.0) + weight
    similarity: dict[str, tuple[float, ...]] = {}
    shared: dict[str, dict[int, tuple[str, ...]]] = {}
    for item in week:
        vector = weighted.vectors.get(item.key, {})
        own = members.get(item.key)
        sims = []
        why: dict[int, tuple[str, ...]] = {}
        for theme, profile in enumerate(profiles):
            if own == theme:  # leave one out
                profile = {t: w - vector.get(t, 0.0) for t, w in profile.items()}
            norm = math.sqrt(sum(w * w for w in profile.values()))
            if not norm:
                sims.append(0.0)
                continue
            contributions = {t: w * profile[t] for t, w in vector.items() if profile.get(t, 0.0) > 1e-9}
            sims.append(sum(contributions.values()) / norm)
            why[theme] = tuple(vocab.surface(t) for t, _ in sorted(contributions.items(), key=lambda kv: -kv[1])[:4])
        similarity[item.key] = tuple(sims)
        shared[item.key] = why
    return Affinity(similarity, shared)
