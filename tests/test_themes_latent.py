"""The latent-terms head (bot.themes.latent) and its place in the learned model's mix (bot.themes.learned)."""

from __future__ import annotations

import gzip
import json
import math
import sys
from array import array
from importlib import resources
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))

import themes_quality as tq  # noqa: E402

from bot import embedding  # noqa: E402
from bot.themes import Item, load_themes  # noqa: E402
from bot.themes.latent import (  # noqa: E402
    LATENT_RESOURCE,
    LatentHead,
    head_from_json,
    head_from_rows,
    head_to_json,
    shipped_latent_head,
)
from bot.themes.learned import LATENT_SHARE, LearnedModel, model_for  # noqa: E402


def _items(name: str) -> list[Item]:
    eval_set = tq.SETS[name]
    weeks = tq.feed_weeks(eval_set.feed)
    return [item for week in eval_set.weeks or tuple(weeks) for item in weeks[week]]


def test_the_shipped_head_reads_the_encoders_latent_terms_for_every_bundled_theme() -> None:
    head = shipped_latent_head()
    assert head is not None, f"bot/data/{LATENT_RESOURCE} is missing from the package"
    assert head.encoder == embedding.ENCODER, "the head must be trained on the terms the poll stores"
    assert head.features == embedding.LATENT_FEATURES and head.source
    assert set(head.theme_keys) == {theme.key for theme in load_themes(None).themes}
    chosen = model_for(load_themes(None))
    assert chosen is not None and chosen.latent is head


def test_the_head_survives_its_json_form_and_refuses_a_broken_one() -> None:
    head = head_from_rows("enc", ("a", "b"), (0.1, -0.1), ((1.0, 0.0), (0.0, 1.0), (0.5, -0.5)), "test")
    again = head_from_json(json.loads(json.dumps(head_to_json(head))))
    assert again == head
    # term 0 is for "a", term 1 for "b"; only the direction of the terms counts (they are made unit length)
    leaning_a = head.probabilities(((0, 2.0), (1, 0.5)))
    assert math.isclose(sum(leaning_a.values()), 1.0) and leaning_a["a"] > leaning_a["b"]
    assert head.probabilities(((0, 4.0), (1, 1.0))) == pytest.approx(leaning_a)
    assert head.probabilities(((1, 1.0),))["b"] > 0.5
    with pytest.raises(ValueError, match="outside"):
        head.probabilities(((3, 1.0),))
    with pytest.raises(ValueError, match="one row of weights per latent term"):
        LatentHead("enc", ("a", "b"), (0.0, 0.0), 3, array("h", [1, 2, 3]), 0.001)


def test_the_shipped_file_is_the_json_form() -> None:
    data = gzip.decompress(resources.files("bot.data").joinpath(LATENT_RESOURCE).read_bytes())
    assert head_from_json(json.loads(data)) == shipped_latent_head()


def test_an_entry_with_latent_terms_gets_half_its_head_from_them() -> None:
    """Without neighbours: the sentence model is the vector's head and the latent head, LATENT_SHARE
    apart; an entry polled before latent terms were stored is read by the vector's head alone."""
    themes = load_themes(None)
    model = model_for(themes)
    assert model is not None and model.head is not None and model.latent is not None
    item = next(item for item in _items("dev") if item.vector is not None and item.latent)
    assert item.vector is not None and item.latent is not None
    plain = LearnedModel(model.word, model.head)
    mixed = LearnedModel(model.word, model.head, latent=model.latent)
    without_terms = Item(item.key, item.title, item.summary, vector=item.vector)
    head_only = plain.read(item, themes).sentence
    assert head_only is not None and mixed.read(without_terms, themes).sentence == head_only
    by_term = model.latent.probabilities(item.latent)
    both = mixed.read(item, themes).sentence
    assert both is not None and math.isclose(sum(both), 1.0, rel_tol=1e-6)
    for whole, vector, theme in zip(both, head_only, themes.themes, strict=True):
        assert math.isclose(whole, (1 - LATENT_SHARE) * vector + LATENT_SHARE * by_term[theme.key], abs_tol=1e-12)


def test_the_head_learned_the_labelled_entries() -> None:
    """On entries it was trained on (the bundled feed's labelled weeks) it mostly agrees with the
    hand labels; on entries it never saw, bench/themes_quality.py measures the grouping."""
    head = shipped_latent_head()
    assert head is not None
    find, agree, rows = tq.scorer().find, 0, 0
    for name in ("dev", "dev-late"):
        labels = tq.load_labels(tq.SETS[name].labels)
        for item in _items(name):
            assert item.latent is not None
            probabilities = head.probabilities(item.latent)
            agree += max(probabilities, key=probabilities.__getitem__) == tq.THEME_OF_CODE[find(labels, item.title)[1]]
            rows += 1
    assert rows == 77 and agree / rows >= 0.85, agree


def test_every_evaluation_entry_has_stored_latent_terms() -> None:
    latents = tq.stored_latents()
    for name in ("dev", "heldout31-zh", "heldout34-en", "pl-dev"):
        items = _items(name)
        assert items and all(item.latent == latents[tq.vector_key(item.title, item.summary)] for item in items), name
