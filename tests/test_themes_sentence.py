"""The sentence head (bot.themes.sentence) and its mix with the word model (bot.themes.learned)."""

from __future__ import annotations

import json
import math
import sys
from importlib import resources
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))

import themes_quality as tq  # noqa: E402

from bot import embedding  # noqa: E402
from bot.themes import Item, group_week, load_themes  # noqa: E402
from bot.themes.learned import SENTENCE_SHARE, LearnedModel, model_for, shipped_model  # noqa: E402
from bot.themes.sentence import HEAD_RESOURCE, SentenceHead, head_from_json, head_to_json, shipped_head  # noqa: E402


def _items(name: str) -> list[Item]:
    eval_set = tq.SETS[name]
    weeks = tq.feed_weeks(eval_set.feed)
    return [item for week in eval_set.weeks or tuple(weeks) for item in weeks[week]]


def test_the_shipped_head_reads_the_encoders_vectors_for_every_bundled_theme() -> None:
    head = shipped_head()
    assert head is not None, f"bot/data/{HEAD_RESOURCE} is missing from the package"
    assert head.encoder == embedding.ENCODER, "the head must be trained on the vectors the poll stores"
    assert set(head.theme_keys) == {theme.key for theme in load_themes(None).themes}
    assert head.dimensions == embedding.DIMENSIONS and head.source
    chosen = model_for(load_themes(None))
    assert chosen is not None and chosen.head is head and chosen.word is shipped_model()


def test_the_head_survives_its_json_form_and_refuses_a_broken_one() -> None:
    head = SentenceHead("enc", ("a", "b"), (0.1, -0.1), ((1.0, 0.0, 0.5), (0.0, 1.0, -0.5)), "test")
    again = head_from_json(json.loads(json.dumps(head_to_json(head))))
    assert again == head
    probabilities = head.probabilities((0.2, 0.1, 0.0))
    assert math.isclose(sum(probabilities.values()), 1.0) and probabilities["a"] > probabilities["b"]
    with pytest.raises(ValueError, match="expected 3"):
        head.probabilities((0.2, 0.1))
    broken = head_to_json(head)
    broken["weights"][1] = broken["weights"][1][:2]
    with pytest.raises(ValueError, match="one width"):
        head_from_json(broken)


def test_the_shipped_file_is_the_json_form() -> None:
    text = resources.files("bot.data").joinpath(HEAD_RESOURCE).read_text(encoding="utf-8")
    assert head_from_json(json.loads(text)) == shipped_head()


def test_an_entry_with_a_vector_gets_half_its_probability_from_the_head() -> None:
    themes = load_themes(None)
    model = model_for(themes)
    assert model is not None and model.head is not None
    item = next(item for item in _items("dev") if item.vector is not None)
    bare = Item(item.key, item.title, item.summary)
    words = model.read(bare, themes)
    both = model.read(item, themes)
    assert words.sentence is None and words.probabilities == model.word.read(bare, themes).probabilities
    assert both.sentence is not None and math.isclose(sum(both.sentence), 1.0, rel_tol=1e-6)
    for mixed, word, whole in zip(both.probabilities, words.probabilities, both.sentence, strict=True):
        assert math.isclose(mixed, (1 - SENTENCE_SHARE) * word + SENTENCE_SHARE * whole, abs_tol=1e-12)
    # a bare word model given by the caller reads words only, vector or not
    assert LearnedModel(model.word).read(item, themes).sentence is None


def test_the_head_learned_the_labelled_entries() -> None:
    """On entries it was trained on (the bundled feed's labelled weeks) it mostly agrees with the
    hand labels; on entries it never saw, bench/themes_quality.py measures the grouping."""
    head = shipped_head()
    assert head is not None
    find, agree, rows = tq.scorer().find, 0, 0
    for name in ("dev", "dev-late"):
        labels = tq.load_labels(tq.SETS[name].labels)
        for item in _items(name):
            assert item.vector is not None
            probabilities = head.probabilities(item.vector)
            agree += max(probabilities, key=probabilities.__getitem__) == tq.THEME_OF_CODE[find(labels, item.title)[1]]
            rows += 1
    assert rows == 77 and agree / rows >= 0.85, agree


def test_grouping_with_vectors_is_the_same_in_any_order() -> None:
    themes = load_themes(None)
    items = _items("heldout6-en")[:14]
    assert all(item.vector is not None for item in items)
    forward = group_week(items, themes).groups
    backward = group_week(list(reversed(items)), themes).groups
    assert [(g.name, g.keys) for g in forward] == [(g.name, g.keys) for g in backward]
    whys = [why for group in forward for why in group.explanations if why.learned_points]
    assert whys and all(why.learned_sentence is not None for why in whys)


def test_the_head_reads_chinese_and_english_alike() -> None:
    """The encoder is multilingual: the Chinese and the English write-up of the same paper get the
    same top theme from the head (1,126 papers of 22 sets in both languages: 0.97 measured)."""
    head = shipped_head()
    assert head is not None
    find = tq.scorer().find

    def tops(name: str) -> dict[int, str]:
        labels = tq.load_labels(tq.SETS[name].labels)
        out = {}
        for item in _items(name):
            assert item.vector is not None
            probabilities = head.probabilities(item.vector)
            out[labels.index(find(labels, item.title))] = max(probabilities, key=probabilities.__getitem__)
        return out

    pairs = [("dev-late", "dev-en-late")] + [(f"dev{n}", f"dev{n}-en") for n in range(6, 15)]
    pairs += [(f"heldout{n}-zh", f"heldout{n}-en") for n in range(2, 13)]
    same = papers = 0
    for chinese_set, english_set in pairs:
        chinese, english = tops(chinese_set), tops(english_set)
        assert chinese.keys() == english.keys()
        same += sum(chinese[line] == english[line] for line in chinese)
        papers += len(chinese)
    assert papers > 1000 and same / papers >= 0.93, (same, papers)
