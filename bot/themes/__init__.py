"""Sort one week's entries into a few named themes.

The digest reads best as a handful of meaningful sections, not a wall of
one-entry headings. This package does that, deterministically, offline and
explainably; it does no I/O except reading a themes file you name:

- ``lexicon``: reading and checking the themes file (TOML)
- ``pipeline``: fit per feed, then read, weigh and lay out (docs/grouping.md)
- ``readers`` / ``vote``: pure functions giving each entry points per theme, with reasons
- ``scoring``: the keyword reader's scores, with every hit kept
- ``learned``: the default theme pack's word model
- ``layout``: placed entries into sections: lone entries, the cap, the catch-all
- ``terms`` / ``derive``: sections from shared distinctive terms
- ``suggest``: a starter themes file from a feed's own entries

Nothing here is text a reader sees, beyond what the themes file and the
entries say: sections carry a ``kind`` and the renderer words it.
"""

from bot.themes.lexicon import DEFAULT_THEMES_LABEL, load_themes, missing_names, names_warning, parse_themes
from bot.themes.model import Explanation, Fit, Group, Hit, Item, ThemeDef, ThemeScore, ThemeSet
from bot.themes.pipeline import Grouping, feed_fit, group_items, group_week, theme_fit
from bot.themes.readers import READERS, Context, EditorLabel
from bot.themes.scoring import keyword_pattern, normalise_text, score_details, score_item
from bot.themes.suggest import suggest_themes
from bot.themes.vote import Vote

__all__ = [
    "READERS",
    "Context",
    "EditorLabel",
    "Vote",
    "feed_fit",
    "DEFAULT_THEMES_LABEL",
    "Explanation",
    "Fit",
    "Group",
    "Grouping",
    "Hit",
    "Item",
    "ThemeDef",
    "ThemeScore",
    "ThemeSet",
    "group_items",
    "group_week",
    "keyword_pattern",
    "load_themes",
    "missing_names",
    "names_warning",
    "normalise_text",
    "parse_themes",
    "score_details",
    "score_item",
    "suggest_themes",
    "theme_fit",
]
