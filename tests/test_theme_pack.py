"""The default theme pack: its themes file and the trained file `make models` writes from the
training split. The cheap checks run everywhere; retraining needs `.[train]` (docs/grouping.md)."""

from __future__ import annotations

from bot.themes import load_themes
from bot.themes.learned import shipped_model
from evaluation import grouping as ev
from scripts.train_theme_model import SOURCES, labelled_items


def test_the_model_learns_from_the_training_split_only() -> None:
    names = [name for names in SOURCES.values() for name in names]
    assert names and all(ev.SETS[name].split == "train" for name in names), \
        [name for name in names if ev.SETS[name].split != "train"]


def test_the_shipped_model_is_what_the_script_trains_from() -> None:
    """Its recorded recipe names the script's sources, entry count and themes."""
    model = shipped_model()
    assert model is not None
    assert set(model.theme_keys) == {theme.key for theme in load_themes().themes}
    assert f"{len(labelled_items())} labelled entries of {', '.join(SOURCES)};" in model.source
