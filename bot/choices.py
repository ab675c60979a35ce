"""Themes per reader (issue 36): which sections of the digest a reader chose.

A choice is a set of theme keys of the themes file. It is stored in one
canonical form, the keys sorted and joined by commas (``Subscriber.themes``,
``Delivery.themes``, ``DigestVariant.themes``), so that readers with the same
choice share one rendered copy and the database can count them with a
GROUP BY. ``None`` (no choice) means every section; so does a choice left
empty when its themes leave the themes file.

Only themes of the themes file can be chosen: the catch-all and the sections
derived from a week's own terms have no stable key, so a reader with a choice
finds them under "also this week" (``bot.render``).

Functions that take a Session leave committing to the caller.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from bot.errors import BotError
from bot.models import Subscriber, SubscriberState
from bot.themes import ThemeSet

log = logging.getLogger(__name__)

SEPARATOR = ","
_SPLIT = re.compile(r"[\s,;|]+")  # what an import file may separate keys with


class ChoiceError(BotError):
    """A theme choice naming a key the themes file does not have."""


@dataclass(frozen=True)
class ThemeOption:
    """One theme a reader can choose, named in the site's language."""

    key: str
    name: str
    description: str


def encode(keys: Iterable[str]) -> str | None:
    """The canonical form of a choice; None for no keys (every section)."""
    unique = sorted({key.strip() for key in keys if key.strip()})
    return SEPARATOR.join(unique) if unique else None


def decode(value: str | None) -> frozenset[str]:
    """The keys of a stored choice; empty for None (every section)."""
    return frozenset(key for key in (value or "").split(SEPARATOR) if key)


def split_keys(text: str) -> list[str]:
    """Keys as a person writes them in a file: separated by spaces, commas,
    semicolons or bars."""
    return [key for key in _SPLIT.split(text.strip()) if key]


def theme_keys(themes: ThemeSet) -> tuple[str, ...]:
    """The keys a reader can choose, in the themes file's order."""
    return tuple(theme.key for theme in themes.themes)


def check_keys(keys: Iterable[str], themes: ThemeSet) -> str | None:
    """``keys`` as a canonical choice, or ChoiceError naming the unknown ones."""
    known = set(theme_keys(themes))
    unknown = sorted({key for key in keys if key not in known})
    if unknown:
        raise ChoiceError(
            f"no such theme in the themes file: {', '.join(unknown)}",
            hint=f"the themes are: {', '.join(theme_keys(themes))} "
                 "(`digestbot themes list` shows them with their names)")
    return encode(keys)


def options(themes: ThemeSet, language: str) -> list[ThemeOption]:
    """The themes a reader can choose, named in ``language`` where the file has
    that name (else in the file's own language), in the file's order."""
    native = language == themes.language
    return [ThemeOption(theme.key, theme.name_in(language, themes.language) or theme.name,
                        theme.description if native else "")
            for theme in themes.themes]


# --- queries ---------------------------------------------------------------------------

def set_choice(sub: Subscriber, choice: str | None) -> bool:
    """Give ``sub`` the canonical ``choice``; True if it changed."""
    if sub.themes == choice:
        return False
    sub.themes = choice
    return True


def prune(session: Session, themes: ThemeSet) -> int:
    """Drop from every reader's choice the keys that left the themes file, with
    a log line per key; a reader left with none gets every section again.
    Returns how many readers changed. Run before a send makes its ledger rows."""
    known = set(theme_keys(themes))
    changed = 0
    gone: dict[str, int] = {}
    for sub in session.scalars(select(Subscriber).where(Subscriber.themes.is_not(None))):
        keys = decode(sub.themes)
        stale = keys - known
        if not stale:
            continue
        for key in stale:
            gone[key] = gone.get(key, 0) + 1
        sub.themes = encode(keys & known)
        changed += 1
    for key, readers in sorted(gone.items()):
        log.warning("theme %r is no longer in the themes file: dropped from %d reader(s)' "
                    "choice (a reader left with no theme gets every section)", key, readers)
    if changed:
        session.flush()
    return changed


def choice_counts(session: Session) -> dict[str, int]:
    """How many confirmed readers chose each theme (a reader may choose several),
    plus ``"everything"``: those with no choice."""
    rows = session.execute(
        select(Subscriber.themes, func.count()).where(Subscriber.status == SubscriberState.CONFIRMED)
        .group_by(Subscriber.themes))
    counts: dict[str, int] = {"everything": 0}
    for value, count in rows:
        keys = decode(value)
        if not keys:
            counts["everything"] += count
        for key in keys:
            counts[key] = counts.get(key, 0) + count
    return counts
