"""The learned word model (bot.themes.learned): shipped, used only with the themes it knows, explained."""

from __future__ import annotations

import gzip
import json
from importlib import resources

import pytest

from bot.themes import Explanation, Item, ThemeSet, group_week, load_themes, parse_themes
from bot.themes.explain import explanation_json, explanation_lines
from bot.themes.learned import (
    MODEL_RESOURCE,
    WordModel,
    model_from_json,
    model_to_json,
    model_words,
    shipped_model,
)
from bot.themes.readers import WORDS_WEIGHT, model_for
from evaluation import grouping as tq


def words_points(why: Explanation) -> float:
    """The word reader's points for the theme the entry landed in."""
    return sum(v.points.get(why.theme_key or "", 0.0) for v in why.votes if v.reader == "words")

OTHER_THEMES = """
[settings]
language = "en"
[themes.storage]
name = "Storage engines"
keywords = ["LSM-tree", "B-tree", "compaction"]
[themes.transactions]
name = "Transactions"
keywords = ["serializable", "concurrency control", "MVCC"]
"""


def test_the_shipped_model_knows_every_bundled_theme() -> None:
    model = shipped_model()
    assert model is not None, f"bot/data/{MODEL_RESOURCE} is missing from the package"
    themes = load_themes(None)
    assert set(model.theme_keys) == {theme.key for theme in themes.themes}
    chosen = model_for(themes)
    assert chosen is model
    assert len(model.index) > 50_000, "the vocabulary should cover common Chinese and English words"
    assert model.source, "the model should say how it was made"


def test_a_themes_file_with_other_themes_gets_no_learned_points() -> None:
    themes = parse_themes(OTHER_THEMES, "db.toml")
    assert model_for(themes) is None
    items = [Item(f"k{i}", f"Compaction in LSM-tree engines, part {i}", "Leveled compaction and write amplification.")
             for i in range(5)]
    grouping = group_week(items, themes)
    assert all(words_points(why) == 0 for g in grouping.groups for why in g.explanations)


def _bundled_plus_own_theme() -> ThemeSet:
    """The bundled themes file with one theme of the operator's own appended (the model never learned it)."""
    text = resources.files("bot.data").joinpath("themes.toml").read_text(encoding="utf-8")
    text += '\n[themes.quantum]\nname = "量子强化学习"\nkeywords = ["quantum circuit", "qubit", "量子比特"]\n'
    return parse_themes(text, "extended.toml")


def test_an_operators_own_theme_keeps_the_entries_its_keywords_give_it() -> None:
    """The model weighs only themes it was taught: it must not pull an entry its keywords put
    clearly in the operator's own theme over to a bundled one (it has no vote for the new theme)."""
    themes = _bundled_plus_own_theme()
    assert model_for(themes) is not None, "a file that keeps every bundled key still uses the model"
    own = Item("q", "Qubit mapping for quantum circuits", "We learn a reward model of mapping quality from "
               "preference pairs and optimise the router against the reward model.")
    reward = Item("r", "A process reward model for maths reasoning", "A process reward model scores each step; "
                  "a verifier and a reward model trained on preference pairs.")
    grouping = group_week([own, reward], themes)
    placed = {why.key: (g.theme_key, words_points(why)) for g in grouping.groups for why in g.explanations}
    assert placed["q"] == ("quantum", 0.0)
    assert placed["r"][0] in {"reward_models", "credit_assignment"} and placed["r"][1] > 0


def _model_labels(name: str) -> list[tuple[int, str, str]]:
    """(line of its label, hand label's theme, the model's top theme) per entry of an evaluation set."""
    themes = load_themes(None)
    model = shipped_model()
    assert model is not None
    keys = [theme.key for theme in themes.themes]
    eval_set = tq.SETS[name]
    labels = tq.load_labels(eval_set.labels)
    find = tq.scorer.find
    rows = []
    for week, items in tq.feed_weeks(eval_set.feed).items():
        if eval_set.weeks and week not in eval_set.weeks:
            continue
        for item in items:
            label = find(labels, item.title)
            probabilities = model.read(item, themes).probabilities
            top = keys[max(range(len(keys)), key=probabilities.__getitem__)]
            rows.append((labels.index(label), tq.THEME_OF_CODE[label[1]], top))
    return rows


def test_the_model_learned_the_labelled_entries() -> None:
    """On entries it was trained on (the bundled feed's labelled weeks) it mostly agrees with
    the hand labels; what it does on entries it never saw is measured by bench/themes_quality.py."""
    rows = _model_labels("dev") + _model_labels("dev-late")
    agree = sum(label == top for _, label, top in rows)
    assert len(rows) == 77 and agree / len(rows) >= 0.8, agree


def test_the_model_reads_chinese_and_english_alike() -> None:
    """Words of like meaning in either language sit close in the embedding: the Chinese and the
    English write-up of the same paper (same line of their label files) mostly get the same top theme.
    Measured over 22 sets written in both languages (1,126 papers: 0.89 with the shipped model,
    trained on most of them; the model trained on 1,052 entries gave 0.72; one set alone swings)."""
    pairs = [("dev-late", "dev-en-late")]
    pairs += [(f"dev{n}", f"dev{n}-en") for n in range(6, 15)]
    pairs += [(f"heldout{n}-zh", f"heldout{n}-en") for n in range(2, 13)]
    same = papers = 0
    for chinese_set, english_set in pairs:
        chinese = {line: top for line, _, top in _model_labels(chinese_set)}
        english = {line: top for line, _, top in _model_labels(english_set)}
        assert chinese.keys() == english.keys() and len(chinese) >= 44
        same += sum(chinese[line] == english[line] for line in chinese)
        papers += len(chinese)
    assert papers > 1000 and same / papers >= 0.76, (same, papers)


def test_explain_shows_the_learned_points_and_words() -> None:
    themes = load_themes(None)
    items = [
        Item("1", "A verifier for web agents", "We train a verifier that checks each step of a browsing agent "
             "and use its scores as rewards for reinforcement learning on web tasks."),
        Item("2", "Process reward models, read together", "Step-level credit assignment with a process reward model "
             "and a learned critic for long-horizon agents."),
        Item("3", "A benchmark of web agents", "A benchmark and evaluation suite of 500 browsing tasks."),
        Item("4", "Memory for long-running agents", "Agent memory and context management across sessions."),
    ]
    grouping = group_week(items, themes)
    explanations = [why for g in grouping.groups for why in g.explanations]
    learned = [why for why in explanations if words_points(why) > 0]
    assert learned, "with the bundled themes every entry gets the model's points"
    assert all(0 < words_points(why) <= WORDS_WEIGHT * themes.min_score for why in learned)
    why = next(w for w in learned if w.key == "1")
    words = next(v for v in why.votes if v.reader == "words")
    assert words.reasons[why.theme_key or ""].startswith("p=")
    assert any(line.strip().startswith("words: p=") for line in explanation_lines(why))
    assert explanation_json(why)["readers"]["words"]["points"][why.theme_key] == round(words_points(why), 2)
    without = group_week(items, themes, model=False)
    assert all(words_points(w) == 0 for g in without.groups for w in g.explanations)


def test_the_model_survives_its_json_form() -> None:
    rows = {"credit": (1.234, -0.5), "信用": (0.0, 2.0)}
    model = WordModel.from_rows(("a", "b"), (0.5, -0.5), rows, "test")
    again = model_from_json(json.loads(json.dumps(model_to_json(model))))
    assert again.theme_keys == model.theme_keys and again.source == "test"
    for word, row in rows.items():
        assert again.row(word) == pytest.approx(row, abs=0.01)
    assert again.row("unknown") == (0.0, 0.0)
    item = Item("x", "credit", "信用")
    themes = parse_themes('[themes.a]\nname = "A"\nkeywords = ["x"]\n[themes.b]\nname = "B"\nkeywords = ["y"]\n',
                          "t.toml")
    assert again.read(item, themes).probabilities == pytest.approx(model.read(item, themes).probabilities, abs=1e-3)


def test_a_model_with_short_rows_is_refused() -> None:
    with pytest.raises(ValueError, match="one value per theme"):
        WordModel.from_rows(("a", "b"), (0.0, 0.0), {"word": (1.0,)})
    data = model_to_json(WordModel.from_rows(("a", "b"), (0.0, 0.0), {"word": (1.0, 2.0)}))
    data["words"].append("another")
    with pytest.raises(ValueError, match="one value per theme"):
        model_from_json(data)


def test_the_shipped_file_is_the_json_form() -> None:
    raw = resources.files("bot.data").joinpath(MODEL_RESOURCE).read_bytes()
    data = json.loads(gzip.decompress(raw))
    assert set(data) == {"themes", "bias", "scale", "source", "words", "values"}


def test_words_are_cut_as_in_training() -> None:
    words = model_words("GRPO 的信用分配：Credit-Assignment for LLM agents")
    assert {"grpo", "credit-assignment", "llm", "agents"} <= set(words)
    assert any("信用" in word for word in words)
