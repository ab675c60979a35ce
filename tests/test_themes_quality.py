"""The grouping against hand labels: dev weeks and held-out weeks side by side.

Sets and scorer: tests/fixtures/eval/ (dev), tests/fixtures/heldout*/ (see
their READMEs: written and labelled before the grouping ran on them; heldout2,
heldout3 and heldout4 became dev sets once their per-entry output was read).
The thresholds are the measured figures (README, "Grouping into themes") less
a small margin, so a change that makes grouping worse fails here; they are not
the goals. The issue's goal (F1 >= 0.85, at most 15 % in the catch-all) is not
met on weeks written by someone who never saw the method (held-out 6-14:
0.62-0.90, mean 0.78), while two labellers of such weeks agree at 0.93-1.00.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))

import label_agreement  # noqa: E402
import themes_quality as tq  # noqa: E402

# set: (minimum pairwise F1, maximum catch-all share)
THRESHOLDS = {
    # dev sets: the keywords were written reading them, or the word model was trained on them
    "dev": (0.95, 0.15),  # measured 1.000, 11.1 %
    "dev-en": (0.95, 0.15),  # measured 1.000, 11.1 %
    "dev-late": (0.87, 0.11),  # measured 0.915, 8.0 %
    "dev-en-late": (0.83, 0.10),  # measured 0.877, 4.0 %
    "dev-native-en": (0.78, 0.10),  # measured 0.827, 4.5 %
    "dev6": (0.79, 0.10),  # measured 0.832, 3.7 %
    "dev6-en": (0.84, 0.10),  # measured 0.884, 0.0 %
    "dev7": (0.76, 0.10),  # measured 0.801, 1.9 %
    "dev7-en": (0.78, 0.10),  # measured 0.829, 0.0 %
    "dev8": (0.83, 0.10),  # measured 0.879, 0.0 %
    "dev8-en": (0.89, 0.10),  # measured 0.937, 0.0 %
    "dev9": (0.84, 0.10),  # measured 0.884, 1.9 %
    "dev9-en": (0.95, 0.11),  # measured 1.000, 7.4 %
    "dev10": (0.80, 0.11),  # measured 0.841, 7.4 %
    "dev10-en": (0.66, 0.11),  # measured 0.708, 7.4 %
    "dev11": (0.77, 0.10),  # measured 0.818, 0.0 %
    "dev11-en": (0.84, 0.10),  # measured 0.889, 3.7 %
    "dev12": (0.87, 0.10),  # measured 0.917, 0.0 %
    "dev12-en": (0.79, 0.10),  # measured 0.832, 3.7 %
    "dev13": (0.70, 0.11),  # measured 0.748, 7.4 %
    "dev13-en": (0.62, 0.11),  # measured 0.663, 7.4 %
    "dev14": (0.66, 0.10),  # measured 0.704, 1.9 %
    "dev14-en": (0.75, 0.10),  # measured 0.792, 5.6 %
    # ex-held-out sets: read, then trained on (held-out figures in the README)
    "heldout-zh": (0.93, 0.10),  # measured 0.971, 0.0 %
    "heldout-en": (0.93, 0.10),  # measured 0.970, 3.7 %
    "heldout2-zh": (0.80, 0.24),  # measured 0.842, 20.8 %
    "heldout2-en": (0.84, 0.26),  # measured 0.889, 22.9 %
    "heldout3-zh": (0.90, 0.10),  # measured 0.943, 0.0 %
    "heldout3-en": (0.86, 0.10),  # measured 0.902, 3.7 %
    "heldout4-zh": (0.84, 0.10),  # measured 0.880, 3.6 %
    "heldout4-en": (0.87, 0.10),  # measured 0.917, 3.6 %
    "heldout5-zh": (0.91, 0.11),  # measured 0.957, 7.4 %
    "heldout5-en": (0.82, 0.15),  # measured 0.868, 11.1 %
    # held out: never read, never trained on (aggregate figures only; goal 0.85)
    "heldout6-zh": (0.86, 0.10),  # measured 0.904, 0.0 % (keywords alone 0.728); 3rd measurement
    "heldout6-en": (0.81, 0.10),  # measured 0.854, 0.0 % (keywords alone 0.756); 3rd measurement
    "heldout7-zh": (0.63, 0.10),  # measured 0.672, 1.9 % (keywords alone 0.672); 2nd
    "heldout7-en": (0.66, 0.10),  # measured 0.708, 1.9 % (keywords alone 0.726); 2nd
    "heldout8-zh": (0.76, 0.10),  # measured 0.808, 0.0 % (keywords alone 0.709); 2nd
    "heldout8-en": (0.65, 0.10),  # measured 0.699, 1.9 % (keywords alone 0.667); 2nd
    "heldout9-zh": (0.58, 0.10),  # measured 0.622, 1.9 % (keywords alone 0.526); 2nd
    "heldout9-en": (0.73, 0.10),  # measured 0.776, 1.9 % (keywords alone 0.736); 2nd
    "heldout10-zh": (0.81, 0.10),  # measured 0.854, 0.0 % (keywords alone 0.624); measured once
    "heldout10-en": (0.74, 0.10),  # measured 0.782, 3.7 % (keywords alone 0.546); measured once
    "heldout11-zh": (0.79, 0.10),  # measured 0.838, 1.8 % (keywords alone 0.804); measured once
    "heldout11-en": (0.72, 0.11),  # measured 0.764, 7.3 % (keywords alone 0.791); measured once
    "heldout12-zh": (0.78, 0.10),  # measured 0.829, 0.0 % (keywords alone 0.729); measured once
    "heldout12-en": (0.72, 0.10),  # measured 0.764, 0.0 % (keywords alone 0.692); measured once
    "heldout13-zh": (0.67, 0.11),  # measured 0.711, 7.4 % (keywords alone 0.628); measured once
    "heldout13-en": (0.85, 0.10),  # measured 0.898, 5.6 % (keywords alone 0.803); measured once
    "heldout14-zh": (0.81, 0.10),  # measured 0.854, 1.9 % (keywords alone 0.801); measured once
    "heldout14-en": (0.71, 0.10),  # measured 0.751, 0.0 % (keywords alone 0.722); measured once
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


@pytest.mark.parametrize("name", label_agreement.SETS)
def test_two_labellers_of_a_held_out_set_agree_closely(name: str) -> None:
    """The ceiling the grouping is measured against: a second, independent labelling
    of the same entries scores 0.93-1.00 against the first (README)."""
    found = label_agreement.agreement(name)
    assert found.entries >= 50
    assert found.same_primary >= 0.85, found.show()
    assert min(found.first_as_grouping, found.second_as_grouping) >= 0.9, found.show()
