"""The grouping against hand labels: each split's mean next to a floor, and other fields.

Sets, splits and scorer: the ``evaluation`` package (tests/fixtures/*/README.md describe the
sets). Held-out sets are judged by their split's mean alone. The floors are the figures measured
with this code (docs/grouping.md) less a small margin, so a change that makes grouping worse
fails here; they are not the goals (F1 0.85 on held-out weeks, the level two labellers reach).
"""

from __future__ import annotations

import pytest

from evaluation import agreement as label_agreement
from evaluation import grouping as tq

pytestmark = pytest.mark.slow

# (split, kind of themes file): the lowest mean F1 allowed; measured (docs/grouping.md) in comments
FLOORS = {
    ("train", "rl"): 0.83,  # measured 0.855 over 83 sets (the word model was trained on these)
    ("dev", "suggest"): 0.55,  # measured 0.577
    ("dev", "nofile"): 0.54,  # measured 0.565
    ("heldout", "rl"): 0.69,  # measured 0.714
    ("heldout", "suggest"): 0.65,  # measured 0.683
    ("heldout", "nofile"): 0.55,  # measured 0.580
}


@pytest.mark.parametrize(("split", "kind"), sorted(FLOORS))
def test_each_split_scores_its_floor(split: tq.Split, kind: str) -> None:
    names = tq.names_in(split, kind)
    assert names
    assert tq.mean_f1(names) >= FLOORS[split, kind]


# another field: must beat "one section per week" by a wide margin
# Every other-field set but the Chinese ones' weak spots, which have regression floors in THRESHOLDS
# instead: with a file `themes suggest` wrote from it, the systems feed scores 0.505 and the
# recommender feed 0.464 (one section per week: 0.408 and 0.319), and grouped by shared terms the
# recommender feed scores 0.505, under the margin asked here (docs/grouping-quality.md, "Stop 29").
OTHER_FIELD = ("pl-dev", "pl-dev-suggest", "db", "db-suggest", "vision-en", "vision-en-suggest", "security-en",
               "security-en-suggest", "bio-en", "bio-en-suggest", "systems-zh")


@pytest.mark.parametrize("name", OTHER_FIELD)
def test_another_field_beats_one_section_per_week(name: str) -> None:
    eval_set = tq.SETS[name]
    themes = tq.themes_for(eval_set, None)
    score, _ = tq.evaluate(eval_set, themes)
    floor, _ = tq.evaluate(eval_set, themes, tq.one_section)
    assert floor.f1 < 0.45  # what one heading per week gets (0.20-0.41 on these sets)
    assert score.f1 >= floor.f1 + 0.2 and score.f1 >= 1.5 * floor.f1, (score.show(), floor.f1)
    assert score.catch_all_share <= 0.15, score.show()


def test_the_scorer_is_the_shared_one() -> None:
    """The copy in the repository scores like the shared evaluation script."""
    labels = tq.load_labels(tq.EVAL / "dev_labels.tsv")
    assert tq.scorer.score is not None
    assert len(labels) == 27 and labels[0] == ("DRACO", "CA", {"CA", "RM"})
    week = {"themes": [
        {"catch_all": False, "entries": [{"title": "Cliff: x"}, {"title": "VICT: y"}]},
        {"catch_all": True, "entries": [{"title": "DRACO z"}, {"title": "unknown"}]},
    ]}
    precision, recall, f1, unlabelled = tq.scorer.score(labels, [week])
    assert (precision, unlabelled) == (1.0, 1)
    assert recall == pytest.approx(1 / 3) and f1 == pytest.approx(0.5)


# the lower of the two pairwise F1s, measured less a margin: held-out 16 is the hardest set to
# label (its second labeller chose other primaries for 6 of 54 entries, and those sat in weeks
# with few entries per topic)
AGREEMENT = {"heldout3": 0.9, "heldout4": 0.9, "heldout5": 0.9, "heldout6": 0.9,  # measured 0.93-1.00
             "heldout15": 0.87, "heldout16": 0.73,  # measured 0.905, 0.766
             "heldout17": 0.87, "heldout18": 0.87,  # measured 0.909, 0.909
             "heldout19": 0.65, "heldout20": 0.61,  # measured 0.687, 0.651
             "heldout21": 0.70, "heldout22": 0.85,  # measured 0.737, 0.889
             "heldout23": 0.77, "heldout24": 0.89,  # measured 0.816, 0.938
             "heldout25": 0.82, "heldout26": 0.91,  # measured 0.865, 0.957
             "heldout27": 0.85, "heldout28": 0.72,  # measured 0.897, 0.766
             "heldout29": 0.71, "heldout30": 0.70,  # measured 0.759, 0.743
             "heldout31": 0.70, "heldout32": 0.77,  # measured 0.743, 0.813
             "heldout33": 0.76, "heldout34": 0.59,  # measured 0.800, 0.636
             "heldout35": 0.84, "heldout36": 0.88,  # measured 0.882, 0.919
             "heldout37": 0.72, "heldout38": 0.65}  # measured 0.761, 0.690


@pytest.mark.parametrize("name", label_agreement.SETS)
def test_two_labellers_of_a_held_out_set_agree_closely(name: str) -> None:
    """The ceiling the grouping is measured against: a second, independent labelling
    of the same entries scores 0.64-1.00 against the first (docs/grouping-quality.md), and names the same
    primary topic for 81-98 % of entries (held-out 32 lowest)."""
    found = label_agreement.agreement(name)
    assert found.entries >= 50
    assert found.same_primary >= 0.8, found.show()
    assert min(found.first_as_grouping, found.second_as_grouping) >= AGREEMENT[name], found.show()
