"""Tests for bot.ingest.papers.extract_papers (paper-name extraction from entry titles)."""

from __future__ import annotations

from pathlib import Path

import feedparser
import pytest

from bot.ingest.papers import extract_papers, reads_like_writeup

FIXTURE = Path(__file__).parent / "fixtures" / "messagedaily-rl.xml"

# Real titles from the fixture feed and the paper names we expect from each.
REAL_TITLES: list[tuple[str, list[str]]] = [
    (
        "信用分配四重奏：给每一步发对奖励——FAULT、SHARPO、T2SPO、DARS 合读",
        ["FAULT", "SHARPO", "T2SPO", "DARS"],
    ),
    (
        "Harness 的三种缩放轴：Mid-Harness × STITCH × Turbo Harness 精读",
        ["Mid-Harness", "STITCH", "Turbo Harness"],
    ),
    ("编码 Agent 训练三条线：token 效率、自验证与安全精读", []),
    ("训练前沿四重奏：蒸馏外推、规模解除、奖励治理与具身评测精读", []),
    (
        "CAMG × Comet-9B：文件即记忆与程序状态推理的 Agent 训练新范式精读",
        ["CAMG", "Comet-9B"],
    ),
    (
        "CodeSkill × NanoHarness：技能抽象与 Harness 效应——被低估的智能体性能杠杆精读",
        ["CodeSkill", "NanoHarness"],
    ),
    (
        "EAPO × DN-MOPD × d-OPD：大模型训练信号的三个盲区与最小修正精读",
        ["EAPO", "DN-MOPD", "d-OPD"],
    ),
    (
        "Gagar × SWE-MILE × CRR：代码智能体强化学习的细粒度信用分配三重奏精读",
        ["Gagar", "SWE-MILE", "CRR"],
    ),
    (
        "Up and Down the Abstraction Ladder: Code-Based Skills for Language Agents 精读",
        ["Up and Down the Abstraction Ladder"],
    ),
    ("训练机制三重奏精读：对数线性稀疏注意力、置信度停止与跨段信用分配", []),
    ("Agent-Editing World Model 精读", ["Agent-Editing World Model"]),
    (
        "SkillGym×VHD-Play：技能与环境从「外挂」到「内化」的两条路线精读",
        ["SkillGym", "VHD-Play"],
    ),
    ("控制 token 注入×工具缓存逆转：Agent 安全与训练基础设施的两个隐蔽失效面精读", []),
    ("当智能体替人跑一整天：PAI 分论坛上，AI 基础设施的三次换轨", []),
    (
        "Critical-State RL：为多轮工具调用诊断「可训练的模型调用」 —— 精读",
        ["Critical-State RL"],
    ),
    (
        "DSec（DeepSeek Elastic Compute）: 面向规模化 Agentic 训练的可扩展沙盒基础设施精读",
        ["DSec"],
    ),
    ("FLARE：用生成式奖励模型为长程编码智能体提供全生命周期稠密监督 —— 精读", ["FLARE"]),
    ("IER-OPD: 1% 的 Token 就够——论同策略蒸馏中的梯度估计精读", ["IER-OPD"]),
    (
        "One to More, More to One：面向软件工程 Agent 的类别感知迭代专家训练"
        "（类别感知 SWE 专家训练精读）",
        ["One to More, More to One"],
    ),
    ("信号质量二重奏：CoVer 验证器协同训练与 DENSE 轨迹蒸馏精读", ["CoVer", "DENSE"]),
    ("RetireOPD × EOS 终止符失配：在线策略蒸馏动力学二重奏精读", ["RetireOPD", "EOS 终止符失配"]),
    (
        "ExecuCritic × AgentGuard × RepoAtlas × Protocol Trimming 精读：编码智能体可靠性四重奏",
        ["ExecuCritic", "AgentGuard", "RepoAtlas", "Protocol Trimming"],
    ),
    (
        "Mo' Models, Mo' Problems × Co-Skill 精读：多智能体选型与边云技能演化双视角",
        ["Mo' Models, Mo' Problems", "Co-Skill"],
    ),
    (
        "Eliciting Weak-to-Strong Generalization with On-Policy Reverse Distillation 精读",
        ["Eliciting Weak-to-Strong Generalization with On-Policy Reverse Distillation"],
    ),
    ("FlowBalance：验证器锚定的自改进——把符号门控装进轨迹平衡精读", ["FlowBalance"]),
    (
        "Bilevel Coordinated Reflection: 多智能体 LLM 系统的博弈论统一理论精读",
        ["Bilevel Coordinated Reflection"],
    ),
    ("CoSkill: 把元技能变成可学习智能体 — 分层技能库的联合强化学习精读", ["CoSkill"]),
    (
        "Iris: Climbing to the Search Frontier — 开源搜索智能体的数据反构造与 SFT-RL 攀爬配方精读",
        ["Iris"],
    ),
    ("RISE: 自外推策略蒸馏把 on-policy 蒸馏变成递归自我改进精读", ["RISE"]),
    (
        "What Does Multi-Harness RL Learn? — 评测 Harness 是 Agent RL 的主导变量精读",
        ["What Does Multi-Harness RL Learn?"],
    ),
    (
        "Rethinking On-Policy Distillation II: One Training Example 精读",
        ["Rethinking On-Policy Distillation II"],
    ),
    ("DRACO 精读：没有验证器时，如何给长程 Agent 训练信号分步定责", ["DRACO"]),
    (
        "When Models Edit Too Much 精读：编码 Agent 的过度编辑病与保真度评测轴",
        ["When Models Edit Too Much"],
    ),
    ("Cliff: Learning Process Rewards from the First Mistake 精读", ["Cliff"]),
    (
        "Does On-Policy Distillation Really Distill? From Noisy Teacher to Self-Improvement 精读",
        ["Does On-Policy Distillation Really Distill?"],
    ),
    (
        "Neuro-symbolic PRM: Enhancing Scientific Reasoning via Structured Traces and "
        "Symbolic Verification 精读",
        ["Neuro-symbolic PRM"],
    ),
    (
        "Not Just Reason, Not Just Scan: Reinforcement Learning for Proactive Scientific "
        "Error Verification over Academic Paper 精读",
        ["Not Just Reason, Not Just Scan"],
    ),
    (
        "WM-R1: Training GUI Agents to Reason and Leverage World Models with "
        "Reinforcement Learning 精读",
        ["WM-R1"],
    ),
    (
        "Boosting LLM Exploration via Weak-Model Guidance in RLVR 精读",
        ["Boosting LLM Exploration via Weak-Model Guidance in RLVR"],
    ),
    ("TTPO: Test-Time Policy Optimization 精读", ["TTPO"]),
]


@pytest.mark.parametrize(("title", "expected"), REAL_TITLES)
def test_real_titles(title: str, expected: list[str]) -> None:
    assert extract_papers(title) == expected


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("", []),
        ("   \n\t ", []),
        ("精读", []),
        ("Mid-Harness × STITCH × Turbo Harness", ["Mid-Harness", "STITCH", "Turbo Harness"]),
        ("Alpha x BetaNet：中文", ["Alpha", "BetaNet"]),
        ("Taxonomy Explorer 精读", ["Taxonomy Explorer"]),  # x inside a word never splits
        ("FooNet 与 BarRL 精读", ["FooNet", "BarRL"]),
        ("CoVer与DENSE：双论文", ["CoVer", "DENSE"]),
        ("FAULT、SHARPO，DARS 合读", ["FAULT", "SHARPO", "DARS"]),
        ("Agent × RL × GRPO：都是领域词", []),
        ("Agent RL：不是论文名", []),
        ("LLM 精读：通用词", []),
        ("FooNet:中文副标题", ["FooNet"]),
        ("Model 10:30 Edition 精读", ["Model 10:30 Edition"]),
        ("Foo（bar）Baz 精读", ["Foo"]),
        ("「SkillGym」×「VHD-Play」：引号", ["SkillGym", "VHD-Play"]),
    ],
)
def test_edge_cases(title: str, expected: list[str]) -> None:
    assert extract_papers(title) == expected


def test_no_duplicates() -> None:
    assert extract_papers("CAMG × Comet-9B × CAMG × camg：重复") == ["CAMG", "Comet-9B"]
    assert extract_papers("FAULT、DARS、FAULT 合读") == ["FAULT", "DARS"]


def test_whitespace_normalised() -> None:
    title = "  Protocol \n Trimming  ×\tAgentGuard　 精读：编码智能体  "
    assert extract_papers(title) == ["Protocol Trimming", "AgentGuard"]
    assert extract_papers("Up  and\tDown the  Abstraction Ladder: x 精读") == [
        "Up and Down the Abstraction Ladder"
    ]


def test_deterministic_and_pure() -> None:
    title = REAL_TITLES[0][0]
    assert extract_papers(title) == extract_papers(title) == REAL_TITLES[0][1]


def _fixture_titles() -> list[str]:
    feed = feedparser.parse(str(FIXTURE))
    return [entry.title for entry in feed.entries]


def test_fixture_has_all_entries() -> None:
    assert len(_fixture_titles()) == 77


def test_every_fixture_title_yields_sane_names() -> None:
    found = 0
    for title in _fixture_titles():
        names = extract_papers(title)
        normalised = " ".join(title.split())
        assert len(names) == len({n.casefold() for n in names}), title
        for name in names:
            assert name, title
            assert name == name.strip(), (title, name)
            assert len(name) <= 80, (title, name)
            assert name in normalised, (title, name)
        found += bool(names)
    # The vast majority of entries name at least one paper.
    assert found >= 70


def test_table_covers_real_fixture_titles() -> None:
    titles = set(_fixture_titles())
    covered = [t for t, _ in REAL_TITLES if t in titles]
    assert len(covered) >= 25


# --- only titles that read like paper write-ups (issue 11) -------------------------------

BLOG_TITLES = [
    "How PostgreSQL 18 uses asynchronous I/O",
    "PostgreSQL 18: what is new for operators",
    "TypeScript: the good parts",
    "Why we moved our queue to SQLite",
    "Rust 1.80 x Python interop",
    "Attention Is All You Need",  # an English title alone is not a write-up's
    "Notes on GRPO",
    "当智能体替人跑一整天：PAI 分论坛上，AI 基础设施的三次换轨",
]


@pytest.mark.parametrize("title", BLOG_TITLES)
def test_blog_titles_name_no_papers(title: str) -> None:
    assert not reads_like_writeup(title)
    assert extract_papers(title) == []


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("FLARE: dense rewards for coding agents", ["FLARE"]),  # an acronym before a colon
        ("WM-R1: Training GUI Agents", ["WM-R1"]),
        ("FooNet：中文副标题", ["FooNet"]),  # a name, then a Chinese subtitle
        ("Alpha × Beta", ["Alpha", "Beta"]),  # × pairs names
        ("Attention Is All You Need 精读", ["Attention Is All You Need"]),  # a reading marker
        ("信号质量二重奏：CoVer 验证器与 DENSE 轨迹蒸馏", ["CoVer", "DENSE"]),  # an ensemble word
    ],
)
def test_writeup_titles_do(title: str, expected: list[str]) -> None:
    assert reads_like_writeup(title)
    assert extract_papers(title) == expected

