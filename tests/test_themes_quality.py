"""The grouping against hand labels: dev weeks and held-out weeks side by side.

Sets and scorer: tests/fixtures/eval/ (dev), tests/fixtures/heldout*/ (see
their READMEs: written and labelled before the grouping ran on them; heldout2,
heldout3 and heldout4 became dev sets once their per-entry output was read).
The thresholds are the measured figures (README, "Grouping into themes") less
a small margin, so a change that makes grouping worse fails here; they are not
the goals. The issue's goal (F1 >= 0.85, at most 15 % in the catch-all) is not
met on weeks written by someone who never saw the method (held-out 6, measured
once: 0.73 Chinese, 0.76 English), while two labellers of such weeks agree at 0.93-1.00.
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
    "dev": (0.95, 0.15),  # measured 1.000, 11.1 %
    "dev-en": (0.86, 0.15),  # measured 0.894, 7.4 %
    "dev-late": (0.84, 0.10),  # measured 0.877, 0.0 %
    "dev-en-late": (0.84, 0.10),  # measured 0.877, 0.0 %
    "dev-native-en": (0.74, 0.10),  # measured 0.773, 2.3 %
    "dev6": (0.78, 0.10),  # measured 0.815, 3.7 %
    "dev6-en": (0.70, 0.10),  # measured 0.735, 0.0 %
    "dev7": (0.74, 0.10),  # measured 0.775, 3.7 % (first run on the final code)
    "dev7-en": (0.72, 0.10),  # measured 0.756, 3.7 %
    "dev8": (0.64, 0.10),  # measured 0.678, 1.9 %
    "dev8-en": (0.71, 0.10),  # measured 0.746, 0.0 %
    "heldout2-zh": (0.90, 0.15),  # measured 0.938, 12.5 % (a dev set now)
    "heldout2-en": (0.81, 0.15),  # measured 0.846, 12.5 % (a dev set now)
    "heldout3-zh": (0.81, 0.10),  # measured 0.847, 1.9 % (a dev set now; 0.562 held out)
    "heldout3-en": (0.81, 0.10),  # measured 0.847, 5.6 % (a dev set now; 0.561 held out)
    "heldout4-zh": (0.71, 0.10),  # measured 0.745, 0.0 % (a dev set now; 0.617 held out)
    "heldout4-en": (0.46, 0.10),  # measured 0.501, 3.6 % (a dev set now; 0.492 held out)
    "heldout5-zh": (0.76, 0.10),  # measured 0.798, 5.6 % (0.697 at its first measurement; goal 0.85)
    "heldout5-en": (0.69, 0.12),  # measured 0.730, 7.4 % (goal 0.85: not met)
    "heldout6-zh": (0.69, 0.10),  # measured 0.728, 5.6 % (held out, measured once; goal 0.85: not met)
    "heldout6-en": (0.72, 0.10),  # measured 0.756, 1.9 % (held out, measured once; goal 0.85: not met)
    "heldout-zh": (0.88, 0.10),  # measured 0.924, 3.7 %
    "heldout-en": (0.87, 0.10),  # measured 0.915, 5.6 %
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
