"""The grouping against hand labels: dev weeks and held-out weeks side by side.

Sets and scorer: tests/fixtures/eval/ (dev), tests/fixtures/heldout/ and
tests/fixtures/heldout2/ (see their READMEs: labelled before the grouping ran
on them, never tuned on). The thresholds are the measured figures (README,
"Grouping into themes") less a small margin, so a change that makes grouping
worse fails here; they are not the goals. The issue's goal (F1 >= 0.85, at
most 15 % in the catch-all) is met on the first held-out set in both
languages, not on the second (0.848 Chinese, 0.77 English).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))

import themes_quality as tq  # noqa: E402

# set: (minimum pairwise F1, maximum catch-all share)
THRESHOLDS = {
    "dev": (0.95, 0.15),  # measured 1.000, 11.1 %
    "dev-en": (0.90, 0.15),  # measured 0.941, 11.1 %
    "dev-late": (0.78, 0.10),  # measured 0.815, 4.0 %
    "dev-en-late": (0.78, 0.10),  # measured 0.815, 4.0 %
    "dev-native-en": (0.74, 0.10),  # measured 0.773, 2.3 %
    "heldout-zh": (0.88, 0.10),  # measured 0.912, 1.9 %
    "heldout-en": (0.83, 0.10),  # measured 0.868, 1.9 %
    "heldout2-zh": (0.81, 0.15),  # measured 0.848, 10.4 %
    "heldout2-en": (0.74, 0.15),  # measured 0.774, 6.2 % (goal 0.85: not met)
}
# another field: must beat "one section per week" by a wide margin
OTHER_FIELD = ("pl-dev", "pl-dev-suggest", "db", "db-suggest")


@pytest.mark.parametrize("name", sorted(THRESHOLDS))
def test_labelled_weeks_score(name: str) -> None:
    eval_set = tq.SETS[name]
    score, _ = tq.evaluate(eval_set, tq.themes_for(eval_set, None))
    min_f1, max_catch_all = THRESHOLDS[name]
    assert score.unlabelled == 0
    assert score.f1 >= min_f1, score.show()
    assert score.catch_all_share <= max_catch_all, score.show()


@pytest.mark.parametrize("name", OTHER_FIELD)
def test_another_field_beats_one_section_per_week(name: str) -> None:
    eval_set = tq.SETS[name]
    themes = tq.themes_for(eval_set, None)
    score, _ = tq.evaluate(eval_set, themes)
    floor, _ = tq.evaluate(eval_set, themes, tq.one_section)
    assert floor.f1 < 0.35  # what one heading per week gets
    assert score.f1 >= floor.f1 + 0.2 and score.f1 >= 1.5 * floor.f1, (score.show(), floor.f1)
    assert score.catch_all_share <= 0.15, score.show()


def test_the_scorer_is_the_shared_one() -> None:
    """The copy in the repository scores like the shared evaluation script."""
    labels = tq.load_labels(tq.EVAL / "dev_labels.tsv")
    assert len(labels) == 27 and labels[0] == ("DRACO", "CA", {"CA", "RM"})
    week = {"themes": [
        {"catch_all": False, "entries": [{"title": "Cliff: x"}, {"title": "VICT: y"}]},
        {"catch_all": True, "entries": [{"title": "DRACO z"}, {"title": "unknown"}]},
    ]}
    precision, recall, f1, unlabelled = tq.scorer().score(labels, [week])
    assert (precision, unlabelled) == (1.0, 1)
    assert recall == pytest.approx(1 / 3) and f1 == pytest.approx(0.5)
