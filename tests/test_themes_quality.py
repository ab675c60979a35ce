"""The grouping against hand labels: dev weeks and held-out weeks side by side.

Sets and scorer: tests/fixtures/eval/ (dev), tests/fixtures/heldout*/ (see
their READMEs: written and labelled before the grouping ran on them; heldout2,
heldout3 and heldout4 became dev sets once their per-entry output was read).
The thresholds are the measured figures (README, "Grouping into themes") less
a small margin, so a change that makes grouping worse fails here; they are not
the goals. The issue's goal (F1 >= 0.85, at most 15 % in the catch-all) is not
met on weeks written by someone who never saw the method (held-out 6-8 with the
learned word model, held-out 6-9: 0.61-0.86, mean 0.75), while two labellers of such weeks agree at 0.93-1.00.
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
    # dev sets: the keywords were written and the learned word model trained on them
    "dev": (0.95, 0.15),  # measured 1.000, 11.1 %
    "dev-en": (0.95, 0.15),  # measured 1.000, 11.1 %
    "dev-late": (0.93, 0.10),  # measured 0.968, 0.0 %
    "dev-en-late": (0.84, 0.10),  # measured 0.877, 0.0 %
    "dev-native-en": (0.79, 0.10),  # measured 0.827, 4.5 %
    "dev6": (0.77, 0.10),  # measured 0.812, 3.7 %
    "dev6-en": (0.76, 0.10),  # measured 0.801, 3.7 %
    "dev7": (0.76, 0.10),  # measured 0.801, 1.9 %
    "dev7-en": (0.79, 0.10),  # measured 0.829, 0.0 %
    "dev8": (0.85, 0.10),  # measured 0.893, 0.0 %
    "dev8-en": (0.90, 0.10),  # measured 0.937, 0.0 %
    "heldout2-zh": (0.86, 0.22),  # measured 0.900, 18.8 % (a dev set now; 11-12 topics a week over the cap)
    "heldout2-en": (0.91, 0.26),  # measured 0.947, 22.9 % (a dev set now)
    "heldout3-zh": (0.84, 0.10),  # measured 0.882, 0.0 % (a dev set now; 0.562 held out)
    "heldout3-en": (0.85, 0.10),  # measured 0.890, 3.7 % (a dev set now; 0.561 held out)
    "heldout4-zh": (0.71, 0.10),  # measured 0.747, 3.6 % (a dev set now; 0.617 held out)
    "heldout4-en": (0.70, 0.12),  # measured 0.740, 9.1 % (a dev set now; 0.492 held out)
    "heldout5-zh": (0.88, 0.12),  # measured 0.917, 7.4 % (a dev set now: the model trained on it)
    "heldout5-en": (0.83, 0.12),  # measured 0.875, 9.3 %
    "heldout-zh": (0.92, 0.10),  # measured 0.956, 0.0 %
    "heldout-en": (0.87, 0.10),  # measured 0.915, 3.7 %
    # held out: never read, never trained on (aggregate figures only; goal 0.85: not met but on 6-zh)
    "heldout6-zh": (0.82, 0.10),  # measured 0.861, 0.0 % (0.728 by keywords alone, its first measurement)
    "heldout6-en": (0.77, 0.10),  # measured 0.814, 3.7 % (0.756 by keywords alone)
    "heldout7-zh": (0.62, 0.10),  # measured 0.656, 1.9 % (keywords alone 0.672), measured once
    "heldout7-en": (0.71, 0.10),  # measured 0.752, 1.9 % (keywords alone 0.726), measured once
    "heldout8-zh": (0.70, 0.10),  # measured 0.743, 1.9 % (keywords alone 0.709), measured once
    "heldout8-en": (0.75, 0.10),  # measured 0.795, 1.9 % (keywords alone 0.667), measured once
    "heldout9-zh": (0.57, 0.10),  # measured 0.608, 1.9 % (keywords alone 0.526), measured once
    "heldout9-en": (0.74, 0.10),  # measured 0.777, 0.0 % (keywords alone 0.736), measured once
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
