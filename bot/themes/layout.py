"""Placed entries into the week's sections; it never knows which readers ran.

- **One theme, one section.** Every placed entry goes to its theme's section, even alone:
  a lone entry keeps its named theme while the week stays within ``max_sections``.
- **Small sections** (``min_section_size`` > 1) fold into their entries' next-best theme in
  the week, else their entries join the rest.
- **Sections from shared terms** (``bot.themes.derive``) gather the rest.
- **The cap**: while the week has more than ``max_sections`` (the catch-all counts), the
  section that costs least to dissolve goes (one whose entries all have another theme in the
  week, then the smallest, derived before themed, the weakest); its entries move to their
  next-best theme still there, else to the catch-all, which is always last.

Sorting uses stable keys (item key, theme file order, terms), so the same entries give the same
sections in any order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bot.themes.derive import Cluster, cluster_items
from bot.themes.model import Explanation, Group, Item, Reason, ThemeScore, ThemeSet
from bot.themes.readers import Context
from bot.themes.scoring import normalise_text
from bot.themes.vote import Vote

SECONDARY_RATIO = 0.5  # a fallback theme must have at least this share of the best one's points


@dataclass(frozen=True)
class Placement:
    """One entry after weighing: every reader's vote, its keyword scores, and its theme (None:
    the weighing placed it nowhere)."""

    item: Item
    votes: tuple[Vote, ...]
    scores: tuple[ThemeScore, ...]
    theme: str | None
    reason: str

    def total(self, key: str) -> float:
        return sum(vote.points.get(key, 0.0) for vote in self.votes)


@dataclass(frozen=True)
class Member:
    """An entry in a section, and why it is there."""

    placement: Placement
    reason: Reason
    shared_terms: tuple[str, ...] = ()


@dataclass(frozen=True)
class Section:
    """A theme's section (``theme`` set) or one made from shared terms (``cluster`` set)."""

    members: tuple[Member, ...]
    theme: str | None = None
    cluster: Cluster | None = None

    def total(self) -> float:
        return sum(m.placement.total(self.theme) for m in self.members) if self.theme else 0.0


def layout(
    placements: Sequence[Placement], themes: ThemeSet, context: Context,
    apart: Mapping[str, Sequence[Item]] | None = None, apart_history: Sequence[Item] = (),
) -> list[Group]:
    """The week's sections from the placed entries of fitting feeds and, grouped each on its
    own by shared terms, the entries of the feeds ``apart`` (those the themes do not fit)."""
    order = [t.key for t in themes.themes]
    by_theme: dict[str, list[Member]] = {}
    rest: list[Placement] = []
    for placement in placements:
        if placement.theme is None:
            rest.append(placement)
        else:
            reason: Reason = "best_theme" if placement.reason == "best_theme" else "readers"
            by_theme.setdefault(placement.theme, []).append(Member(placement, reason))
    by_theme, folded = _fold_small(by_theme, themes, order)
    rest = [*rest, *folded]
    sections = [Section(tuple(members), theme) for theme, members in by_theme.items()]
    catch_all: list[Member] = []
    if rest:
        derived, leftover = _derived(rest, context)
        sections += derived
        catch_all += leftover
    for name in sorted(apart or {}):
        items = list((apart or {})[name])
        background = [i for i in apart_history if i.feed == name]
        clustered, left = _clusters(items, context, background, "themes_do_not_fit")
        sections += clustered
        catch_all += [Member(_unplaced(i), "themes_do_not_fit") for i in left]
    sections, catch_all = _enforce_cap(sections, catch_all, themes, order)
    return _render(sections, catch_all, themes, order)


def _unplaced(item: Item) -> Placement:
    return Placement(item, (), (), None, "themes_do_not_fit")


def _join(sections: list[Section], theme: str, members: Sequence[Member]) -> list[Section]:
    for i, section in enumerate(sections):
        if section.theme == theme:
            return [*sections[:i], Section((*section.members, *members), theme), *sections[i + 1:]]
    return [*sections, Section(tuple(members), theme)]


def _fold_small(
    by_theme: dict[str, list[Member]], themes: ThemeSet, order: list[str]
) -> tuple[dict[str, list[Member]], list[Placement]]:
    """Honour ``min_section_size``: the smallest sections fold into their entries' next-best
    theme in the week; entries with none go back to the rest."""
    sections = {theme: list(members) for theme, members in by_theme.items()}
    rest: list[Placement] = []
    while small := [t for t, m in sections.items() if len(m) < themes.min_section_size]:
        victim = min(small, key=lambda t: (len(sections[t]), sum(m.placement.total(t) for m in sections[t]),
                                           -order.index(t)))
        for member in sections.pop(victim):
            target = _fallback(member.placement, list(sections), themes, order)
            if target is None:
                rest.append(member.placement)
            else:
                sections[target].append(Member(member.placement, "fallback_theme"))
    return sections, rest


def _clusters(items: Sequence[Item], context: Context, background: Sequence[Item], reason: Reason,
              population: Sequence[Item] | None = None) -> tuple[list[Section], list[Item]]:
    clusters = cluster_items(items, context.vocab, population=population, background=background)
    taken = {key for cluster in clusters for key in cluster.keys}
    by_key = {item.key: item for item in items}
    sections = [Section(tuple(Member(_unplaced(by_key[k]), reason, c.shared[k]) for k in c.keys), None, c)
                for c in clusters]
    return sections, [item for item in items if item.key not in taken]


def _derived(rest: Sequence[Placement], context: Context) -> tuple[list[Section], list[Member]]:
    """Sections from shared terms among the unplaced entries, and the entries no cluster took."""
    by_key = {p.item.key: p for p in rest}
    clusters = cluster_items([p.item for p in rest], context.vocab, population=context.week,
                             background=context.history)
    taken = {key for cluster in clusters for key in cluster.keys}
    derived = [Section(tuple(Member(by_key[k], "shared_terms", c.shared[k]) for k in c.keys), None, c)
               for c in clusters]
    return derived, [Member(p, "no_theme") for p in rest if p.item.key not in taken]


def _fallback(placement: Placement, open_themes: Sequence[str], themes: ThemeSet, order: list[str]) -> str | None:
    """The best other theme still in the week where the entry has decent points."""
    own = placement.total(placement.theme) if placement.theme else 0.0
    floor = max(themes.min_score, SECONDARY_RATIO * own)
    candidates = [t for t in open_themes if t != placement.theme and placement.total(t) >= floor]
    return min(candidates, key=lambda t: (-placement.total(t), order.index(t))) if candidates else None


def _enforce_cap(
    sections: list[Section], catch_all: list[Member], themes: ThemeSet, order: list[str]
) -> tuple[list[Section], list[Member]]:
    """Dissolve sections until the week fits ``max_sections`` (catch-all included)."""
    while sections and len(sections) + (1 if catch_all else 0) > themes.max_sections:
        kept = [s.theme for s in sections if s.theme is not None]
        victim = min(sections, key=lambda s: _dissolve_cost(s, kept, themes, order))
        sections = [s for s in sections if s is not victim]
        open_themes = sorted((s.theme for s in sections if s.theme is not None), key=order.index)
        for member in victim.members:
            target = _fallback(member.placement, open_themes, themes, order)
            if target is None:
                catch_all = [*catch_all, Member(member.placement, "over_cap")]
            else:
                sections = _join(sections, target, [Member(member.placement, "fallback_theme")])
    return sections, catch_all


def _dissolve_cost(section: Section, kept: Sequence[str], themes: ThemeSet,
                   order: list[str]) -> tuple[bool, int, int, float, int, str]:
    others = [t for t in kept if t != section.theme]
    stranded = any(_fallback(m.placement, others, themes, order) is None for m in section.members)
    position = order.index(section.theme) if section.theme else 0
    name = section.cluster.name if section.cluster else ""
    return (stranded, len(section.members), 0 if section.theme is None else 1, section.total(), -position, name)


def _explain(member: Member, theme_key: str | None) -> Explanation:
    top = tuple(sorted((s for s in member.placement.scores if s.score > 0), key=lambda s: -s.score)[:3])
    return Explanation(member.placement.item.key, member.reason, theme_key, top, member.shared_terms,
                       votes=member.placement.votes)


def _by_title(member: Member) -> tuple[str, str]:
    return (normalise_text(member.placement.item.title), member.placement.item.key)


def _render(sections: Sequence[Section], catch_all: Sequence[Member], themes: ThemeSet,
            order: list[str]) -> list[Group]:
    """Largest sections first (ties: file order, then derived by name); catch-all last."""

    def rank(section: Section) -> tuple[int, int, int, str]:
        if section.theme is None:
            return (-len(section.members), 1, 0, section.cluster.name if section.cluster else "")
        return (-len(section.members), 0, order.index(section.theme), "")

    groups = []
    for section in sorted(sections, key=rank):
        if section.theme is None:
            assert section.cluster is not None
            members = sorted(section.members, key=_by_title)
            groups.append(Group(
                name=section.cluster.name, name_en=section.cluster.name_en, description="", catch_all=False,
                keys=tuple(m.placement.item.key for m in members), theme_key=None, kind="derived",
                terms=section.cluster.terms, explanations=tuple(_explain(m, None) for m in members)))
            continue
        theme = themes.themes[order.index(section.theme)]
        key = section.theme
        members = sorted(section.members, key=lambda m: (-m.placement.total(key), *_by_title(m)))
        lone = len(members) == 1 and members[0].reason == "best_theme"
        groups.append(Group(
            name=theme.name, name_en=theme.name_en, description=theme.description, catch_all=False,
            keys=tuple(m.placement.item.key for m in members), theme_key=theme.key, kind="theme",
            names={themes.language: theme.name, **theme.names},
            explanations=tuple(_explain(Member(m.placement, "lone_theme") if lone else m, key) for m in members)))
    if catch_all:
        members = sorted(catch_all, key=_by_title)
        names = {themes.language: themes.catch_all_name} if themes.catch_all_name else {}
        if themes.catch_all_name_en:
            names["en"] = themes.catch_all_name_en
        groups.append(Group(
            name=themes.catch_all_name or "", name_en=themes.catch_all_name_en,
            description=themes.catch_all_description, catch_all=True,
            keys=tuple(m.placement.item.key for m in members), theme_key=None, kind="catch_all", names=names,
            explanations=tuple(_explain(m, None) for m in members)))
    return groups
