"""The nearest labelled entries' vote (bot.themes.neighbours) and its place in the learned model."""

from __future__ import annotations

import math
import sys
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))

import themes_quality as tq  # noqa: E402

from bot import embedding  # noqa: E402
from bot.themes import Item, group_week, load_themes  # noqa: E402
from bot.themes.explain import explanation_json, explanation_lines  # noqa: E402
from bot.themes.learned import NEIGHBOUR_SHARE, LearnedModel, model_for  # noqa: E402
from bot.themes.neighbours import (  # noqa: E402
    NEIGHBOURS_RESOURCE,
    Neighbours,
    neighbours_from_npz,
    neighbours_to_npz,
    shipped_neighbours,
)
from bot.themes.sentence import shipped_head  # noqa: E402


def _items(name: str) -> list[Item]:
    eval_set = tq.SETS[name]
    weeks = tq.feed_weeks(eval_set.feed)
    return [item for week in eval_set.weeks or tuple(weeks) for item in weeks[week]]


def _unit(rows: list[list[float]]) -> np.ndarray:
    array = np.array(rows, dtype=np.float32)
    return array / np.linalg.norm(array, axis=1, keepdims=True)


def test_the_k_nearest_vote_and_the_rest_do_not() -> None:
    vectors = _unit([[1, 0, 0], [0.9, 0.1, 0], [0.8, 0.2, 0], [0, 1, 0], [0, 0.9, 0.1], [0, 0, 1]])
    near = Neighbours("enc", ("a", "b", "c"), vectors, np.array([0, 0, 1, 1, 1, 2]), k=3)
    assert near.votes([1.0, 0.05, 0.0]) == {"a": 2, "b": 1}
    assert near.votes([0.0, 2.0, 0.0]) == {"b": 3}  # length does not matter, direction does
    # the one "c" row, then the "b" row leaning its way, then the nearest "a" row
    assert near.votes([0.1, 0.0, 1.0]) == {"c": 1, "b": 1, "a": 1}
    with pytest.raises(ValueError, match="expected 3"):
        near.votes([1.0, 0.0])
    with pytest.raises(ValueError, match="outside the theme list"):
        Neighbours("enc", ("a",), vectors, np.array([0, 0, 1, 1, 1, 2]), k=3)
    with pytest.raises(ValueError, match="at least k"):
        Neighbours("enc", ("a", "b", "c"), vectors[:2], np.array([0, 1]), k=3)


def test_equal_similarities_vote_in_file_order() -> None:
    vectors = _unit([[1, 0], [1, 0], [1, 0], [0, 1]])
    near = Neighbours("enc", ("a", "b"), vectors, np.array([1, 0, 0, 1]), k=1)
    assert near.votes([1.0, 0.0]) == {"b": 1}  # the first of three equal rows


def test_the_file_form_keeps_the_vote_and_is_the_same_bytes_every_time() -> None:
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(40, 16)).astype(np.float32)
    labels = [("a", "b", "c")[i % 3] for i in range(40)]
    data = neighbours_to_npz(vectors, labels, ("a", "b", "c"), encoder="enc", source="test", k=5)
    assert data == neighbours_to_npz(vectors, labels, ("a", "b", "c"), encoder="enc", source="test", k=5)
    near = neighbours_from_npz(data)
    assert (near.encoder, near.source, near.k, near.theme_keys) == ("enc", "test", 5, ("a", "b", "c"))
    exact = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    # int8 rows keep cosine similarity to well within what separates neighbours
    assert np.abs(near.vectors @ exact.T - exact @ exact.T).max() < 0.02
    assert [near.theme_keys[i] for i in near.labels] == labels
    assert near.votes(vectors[3]).most_common(1)[0][0] in {"a", "b", "c"}


def test_the_shipped_neighbours_are_the_labelled_entries() -> None:
    near = shipped_neighbours()
    assert near is not None, f"bot/data/{NEIGHBOURS_RESOURCE} is missing from the package"
    assert near.encoder == embedding.ENCODER and near.dimensions == embedding.DIMENSIONS
    assert set(near.theme_keys) == {theme.key for theme in load_themes(None).themes}
    head = shipped_head()
    assert head is not None and near.theme_keys == head.theme_keys
    assert neighbours_from_npz(resources.files("bot.data").joinpath(NEIGHBOURS_RESOURCE).read_bytes()).source
    chosen = model_for(load_themes(None))
    assert chosen is not None and chosen.neighbours is near
    # every labelled entry of the bundled feed is among them: its nearest row is itself, with its label
    labels, find = tq.load_labels(tq.SETS["dev-late"].labels), tq.scorer().find
    for item in _items("dev-late"):
        assert item.vector is not None
        query = np.asarray(item.vector, dtype=np.float32)
        nearest = int(np.argmax(near.vectors @ (query / np.linalg.norm(query))))
        assert float(near.vectors[nearest] @ (query / np.linalg.norm(query))) > 0.995
        assert near.theme_keys[int(near.labels[nearest])] == tq.THEME_OF_CODE[find(labels, item.title)[1]]


def test_the_vote_is_mixed_into_the_sentence_model() -> None:
    themes = load_themes(None)
    model = model_for(themes)
    assert model is not None and model.neighbours is not None
    item = next(item for item in _items("dev") if item.vector is not None)
    # the heads (the vector's, and the latent terms') without the vote, then with it
    without = LearnedModel(model.word, model.head, latent=model.latent).read(item, themes)
    both = model.read(item, themes)
    assert without.votes is None and both.votes is not None and sum(both.votes) == model.neighbours.k
    assert without.sentence is not None and both.sentence is not None
    for mixed, head, votes in zip(both.sentence, without.sentence, both.votes, strict=True):
        expected = (1 - NEIGHBOUR_SHARE) * head + NEIGHBOUR_SHARE * votes / model.neighbours.k
        assert math.isclose(mixed, expected, abs_tol=1e-12)


def test_explain_says_how_many_neighbours_are_on_the_theme() -> None:
    themes = load_themes(None)
    items = _items("heldout6-en")[:14]
    whys = [why for group in group_week(items, themes).groups for why in group.explanations if why.learned_points]
    assert whys and all(why.learned_votes is not None and why.learned_votes[1] == 5 for why in whys)
    assert any(why.learned_votes and why.learned_votes[0] >= 3 for why in whys)
    why = whys[0]
    assert why.learned_votes is not None
    on, of = why.learned_votes
    assert f"{on} of the {of} nearest labelled entries are on it" in "\n".join(explanation_lines(why))
    assert explanation_json(why)["learned"]["neighbours"] == {"on_theme": on, "of": of}
