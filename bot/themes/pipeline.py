"""One week's entries into named sections: fit, read, weigh, lay out.

1. **Fit, per feed** (``feed_fit``). A feed whose recent entries mostly do not fit the themes
   file clearly (twice ``min_score`` by keywords) is another field: its entries are grouped on
   their own by shared terms and never placed under themes written for another feed.
2. **Read.** Every reader of ``readers`` (``bot.themes.readers``) gives each entry of a fitting
   feed its points per theme, with reasons.
3. **Weigh** (``weigh``). A reader sure of a theme (``Vote.decides``) decides it; otherwise the
   points add up and the entry is placed in its best theme when that reaches ``min_score``.
4. **Lay out** (``bot.themes.layout``): sections, lone entries, the cap, sections from shared
   terms and the catch-all.

Each stage returns new frozen values; none changes what another returned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bot.themes.layout import Placement, layout
from bot.themes.learned import WordModel
from bot.themes.model import FIT_MARGIN, Fit, Group, Item, ThemeScore, ThemeSet
from bot.themes.readers import READERS, Context, EditorLabel, Reader, model_for
from bot.themes.scoring import lexicon, score_details
from bot.themes.vote import Vote

FIT_HISTORY_WEEKS = 3  # fit is judged on the feed's week and about this many weeks before it


@dataclass(frozen=True)
class Grouping:
    """A week laid out: its sections, and how well the themes file fits each feed."""

    groups: list[Group]
    fit: Fit
    fits: Mapping[str, Fit] | None = None  # per feed (Item.feed)


def weigh(votes: Sequence[Vote], keyword_scores: Sequence[ThemeScore], themes: ThemeSet) -> tuple[str | None, str]:
    """The theme the votes give an entry (None: unplaced), and why: a vote that ``decides`` a
    known theme wins; otherwise the theme with the most points (ties: file order), when they
    reach ``min_score``."""
    order = [t.key for t in themes.themes]
    for vote in votes:
        if vote.decides in order:
            return vote.decides, f"decided:{vote.reader}"
    totals = {key: sum(v.points.get(key, 0.0) for v in votes) for key in order}
    best = min(order, key=lambda key: (-totals[key], order.index(key)))
    if totals[best] < themes.min_score:
        return None, "no_theme"
    keyword_best = max(keyword_scores, key=lambda s: s.score).theme_key
    return best, "best_theme" if best == keyword_best else "readers"


def feed_fit(week: Sequence[Item], history: Sequence[Item], themes: ThemeSet) -> Fit:
    """Whether the themes file fits a feed: of its ``week`` and its latest entries before it
    (``FIT_HISTORY_WEEKS`` times as many), how many clearly fit a theme (``FIT_MARGIN`` x
    ``min_score`` by keywords). ``digestbot status``
    judges each feed by this same function, on its newest week."""
    own = {item.key for item in week}
    before = [item for item in history if item.key not in own]
    recent = [*week, *before[max(0, len(before) - FIT_HISTORY_WEEKS * len(week)):]]
    lex = lexicon(themes)
    clear = FIT_MARGIN * themes.min_score
    matched = sum(max((s.score for s in score_details(item, themes, lex)), default=0.0) >= clear for item in recent)
    return Fit(len(recent), matched, themes.min_fit)


def theme_fit(items: Sequence[Item], themes: ThemeSet) -> Fit:
    """How many of ``items`` clearly fit some theme (one pool, no history)."""
    return feed_fit(items, (), themes)


def group_items(items: Sequence[Item], themes: ThemeSet, *, history: Sequence[Item] = ()) -> list[Group]:
    """Group one week's items into at most ``themes.max_sections`` sections."""
    return group_week(items, themes, history=history).groups


def group_week(
    items: Sequence[Item], themes: ThemeSet, *, history: Sequence[Item] = (),
    labels: Sequence[EditorLabel] = (), extra: Mapping[str, Mapping[str, object]] | None = None,
    readers: Sequence[Reader] | None = None, model: WordModel | bool | None = True,
) -> Grouping:
    """Group one week's items, each feed judged for fit on its own.

    ``history`` is the feeds' earlier entries, oldest first: it tells how common a word is and
    joins the theme profiles, but only the week's entries are placed. ``labels`` are the
    editor's earlier placements; ``extra`` is handed to the readers (``Context.extra``);
    ``readers`` is the list of readers (default ``READERS``), in the order ``--explain`` shows them."""
    readers = READERS if readers is None else readers
    ordered = sorted(items, key=lambda item: item.key)
    for first, second in zip(ordered, ordered[1:], strict=False):
        if first.key == second.key:
            raise ValueError(f"duplicate item key {first.key!r}: every item needs its own key")
    if not ordered:
        return Grouping([], Fit(0, 0, themes.min_fit), {})
    feeds = sorted({item.feed for item in ordered})
    fits = {name: feed_fit([i for i in ordered if i.feed == name], [i for i in history if i.feed == name], themes)
            for name in feeds}
    fitting = {name for name, fit in fits.items() if fit.fits}
    fitting |= _decided_feeds(ordered, set(feeds) - fitting, themes, extra or {}, readers)
    week = tuple(item for item in ordered if item.feed in fitting)
    context = Context(themes, week, tuple(i for i in history if i.feed in fitting),
                      tuple(label for label in labels if label.feed in fitting or not label.feed),
                      extra or {}, model_for(themes, model))
    placements = [place(item, context, readers) for item in week]
    apart = {name: [i for i in ordered if i.feed == name] for name in feeds if name not in fitting}
    groups = layout(placements, themes, context, apart, [i for i in history if i.feed not in fitting])
    total = Fit(sum(f.entries for f in fits.values()), sum(f.matched for f in fits.values()), themes.min_fit)
    overall = total if len(fits) > 1 else fits[feeds[0]]
    return Grouping(groups, overall, fits)


def _decided_feeds(items: Sequence[Item], unfit: set[str], themes: ThemeSet,
                   extra: Mapping[str, Mapping[str, object]], readers: Sequence[Reader]) -> set[str]:
    """The feeds whose keywords do not fit the themes file but whose week a reader that
    decides (a confident language model) places: at least ``min_fit`` of its entries decided.
    Such a feed is grouped under the themes, not by shared terms."""
    decided = set()
    for name in sorted(unfit):
        week = tuple(item for item in items if item.feed == name)
        context = Context(themes, week, (), (), extra, None)
        sure = sum(1 for item in week if any(reader(item, context).decides for reader in readers))
        if week and sure >= themes.min_fit * len(week):
            decided.add(name)
    return decided


def place(item: Item, context: Context, readers: Sequence[Reader]) -> Placement:
    """Read one entry with every reader and weigh the votes."""
    votes = tuple(reader(item, context) for reader in readers)
    scores = context.keyword_scores(item)
    theme, reason = weigh(votes, scores, context.themes)
    return Placement(item, votes, scores, theme, reason)
