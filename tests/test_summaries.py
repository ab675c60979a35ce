"""Summaries fill their length budget with whole sentences or clauses (issue 35, item 7).

Seen: "Finding a good join order is crucial for query performance." used 58
of 180 characters: the cut stopped at the first sentence because the second
did not fit whole, though most of its clauses did.
"""

from __future__ import annotations

from bot.digest import trim_summary

JOIN_ORDER = ("Finding a good join order is crucial for query performance. In this paper, we "
              "introduce a new approach that learns join orders from past queries, using "
              "reinforcement learning and a tree-structured neural network, and we show that it "
              "beats PostgreSQL on the Join Order Benchmark.")


def test_a_short_first_sentence_is_followed_by_the_clauses_that_fit():
    trimmed = trim_summary(JOIN_ORDER, 180)
    assert trimmed == ("Finding a good join order is crucial for query performance. In this paper, "
                       "we introduce a new approach that learns join orders from past queries…")
    assert len(trimmed) <= 180 and len(trimmed) > 180 * 3 // 4


def test_chinese_clauses_fill_the_budget_too():
    text = "连接顺序决定查询性能。本文提出一种从历史查询中学习连接顺序的方法，用强化学习训练树形网络，" \
           "在基准上超过了 PostgreSQL 的优化器，并且" + "说明很长" * 20 + "。"
    trimmed = trim_summary(text, 60)
    assert trimmed.startswith("连接顺序决定查询性能。本文提出一种从历史查询中学习连接顺序的方法，"
                              "用强化学习训练树形网络")
    assert trimmed.endswith("…") and len(trimmed) <= 60


def test_a_whole_sentence_beats_a_scrap_of_the_next():
    text = "A" * 160 + ". Yes, " + "b" * 100
    assert trim_summary(text, 180) == "A" * 160 + "."


def test_every_cut_keeps_the_limit():
    for limit in range(20, 260, 7):
        trimmed = trim_summary(JOIN_ORDER, limit)
        assert len(trimmed) <= limit, (limit, trimmed)
