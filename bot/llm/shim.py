"""LLM-SHIM (issue 34): a confident reading moves its entry to its theme's section,
laid over today's grouping.

Temporary. The re-founded grouping takes the model as one reader
(``bot.llm.reader.llm_reader`` returns a ``Vote`` whose ``decides`` the
weighing honours); once it is wired, this module and its one call in
``bot.digest.build.assemble`` go. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from bot.llm.answer import Reading
from bot.themes.model import Group, ThemeSet


def decide(groups: Sequence[Group], readings: Mapping[str, Reading], themes: ThemeSet) -> list[Group]:
    """``groups`` with every confidently read entry in its primary theme's section (made
    when the week has none; a section left empty goes; the catch-all stays last)."""
    decided = {key: r.primary for key, r in readings.items() if r.confident and r.primary is not None}
    if not decided:
        return list(groups)
    by_theme = {theme.key: theme for theme in themes.themes}
    kept: dict[str, list[str]] = {}
    order: list[Group] = []
    for group in groups:
        stays = [key for key in group.keys if decided.get(key, group.theme_key) == group.theme_key
                 or decided.get(key) not in by_theme]
        order.append(group)
        kept[id_of(group)] = stays
    for key, theme_key in sorted(decided.items()):
        if any(key in group.keys and group.theme_key == theme_key for group in groups):
            continue
        target = next((g for g in order if g.theme_key == theme_key), None)
        if target is None:
            theme = by_theme[theme_key]
            target = Group(name=theme.name, name_en=theme.name_en, description=theme.description,
                           catch_all=False, keys=(), theme_key=theme.key, kind="theme",
                           names={themes.language: theme.name, **theme.names})
            at = next((i for i, g in enumerate(order) if g.catch_all), len(order))
            order.insert(at, target)
            kept[id_of(target)] = []
        kept[id_of(target)].append(key)
    # the offline readers' explanations go with their entries (--explain shows both)
    why = {ex.key: ex for group in groups for ex in group.explanations}
    return [replace(group, keys=tuple(kept[id_of(group)]),
                    explanations=tuple(why[key] for key in kept[id_of(group)] if key in why))
            for group in order if kept[id_of(group)]]


def id_of(group: Group) -> str:
    return f"{group.kind}:{group.theme_key or group.name}"
