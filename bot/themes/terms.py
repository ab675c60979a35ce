"""Distinctive terms of entries: what derived sections and `themes suggest` work from.

English words come from a regex, lower-cased and lightly stemmed (plural,
-ing, -ed) so "transactions" and "transaction" are one term, plus two-word
phrases ("concurrency control"); Chinese words come from rjieba, with the
themes' own Chinese phrases re-joined when jieba splits them. Function words
and the generic words of research writing are dropped. Each term remembers
how it was written, so section names read naturally.

Weights are TF-IDF with the document frequencies of the entries at hand (a
week, or the feed's history): a term most entries share (GRPO in an RL feed,
"database" in a databases feed) names no particular topic.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from bot.themes.model import Item

_EN_TOKEN_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_'][A-Za-z0-9]+)*|[^A-Za-z\s]")
CJK_CHAR_RE = re.compile(r"[\u4e00-\u9fff]")  # a Chinese character anywhere: the text (or term) is Chinese
_CJK_RE = re.compile(r"^[\u4e00-\u9fff]{2,}$")
_CJK_RUN_RE = re.compile(r"[\u4e00-\u9fff]+")
TITLE_COUNT = 2  # a term in the title counts as this many summary mentions
MAX_DF_SHARE = 0.5  # terms in more than this share of the entries name no topic


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# General English function words plus the verbs and nouns every abstract uses.
EN_STOPWORDS = _words(
    """a about above across after again against all almost also although always am among an and another any
    are around as at away back be became because become becomes been before being below between both but by can
    cannot could did do does doing done down during each either else enough even ever every few for from further
    get gets given gives go goes got had has have having he her here hers him his how however i if in into is it
    its itself just least less let like made make makes making many may me might more most much must my near
    neither never new next no nor not now of off often on once one only onto or other others otherwise our out
    over own per perhaps rather really same several shall she should since so some still such than that the
    their them themselves then there therefore these they this those though three through thus to together too
    toward towards two under until up upon us use used uses using very via vs was way we well were what when
    where whether which while who whom whose why will with within without would yet you your
    paper papers propose proposes proposed present presents presented show shows shown showing find finds found
    introduce introduces describe describes described study studies studied approach approaches method methods
    result results work works novel first second third achieve achieves achieved improve improves improved
    improvement improvements outperform outperforms based existing recent recently prior previous state art
    significant significantly substantially large larger small smaller high higher low lower better best key
    main simple simply several various different particular problem problems challenge challenges set sets task
    tasks up times time real world deep read reading read-together together across toward whole part parts
    able ability allow allows allowing need needs needed require requires required provide provides provided
    support supports supported effective effectively efficient efficiently fast faster order orders magnitude
    number numbers case cases data-driven end both also ones kind kinds lot lots ways yield yields even
    compared compare comparing instead versus among etc eg ie et al x"""
)
# Chinese function words and the generic words of the feed's write-ups.
ZH_STOPWORDS = _words(
    """精读 合读 本文 本篇 论文 两篇 三篇 四篇 一篇 同日 同期 方法 提出 通过 实现 提升 结果 实验 性能 机制
    框架 设计 发现 能力 分析 证据 研究 团队 大学 联合 合作 首次 核心 关键 一个 两个 三个 我们 这篇 以及 同时
    进行 使用 基于 其中 之间 作者 覆盖 拆解 结构 灵感 可迁移 机构 实验室 问题 解法 背景 定位 动机 部分 外部
    交叉 根源 反推 通用 全文 深度 现有 方案 场景 效果 显著 超过 超越 达到 平均 相对 百分点 基线 最强 开源 证明
    给出 这一 这种 一种 没有 不是 而是 就是 可以 需要 如何 什么 为什么 并且 而且 因为 所以 主流 不同 相同 同一
    更新 方向 完整 链条 证据链 二重奏 三重奏 四重奏 双视角 甚至 正确 目标 质量 直接 实测 何时 新范式 范式 路线
    两条 三条 视角 互补 共同 指向 反直觉 一致 全面 大幅 明显 进一步 之后 之前 其他 这些 那些 已经 还是 只是
    只有 只要 不仅 不会 能够 可能 已有 认为 指出 表明 显示 说明 取得 获得 带来 提供 支持 引入 采用 利用 构建
    分别 均 同样 作为 对于 关于 以及 这类 此类 这项 该文 工作 上述 下述 问题 难题 当时 目前 一起 之一 多个
    更好 更强 最好 最优 较好 相当 接近 往往 通常 真正 实际 完全 主要 重要 大量 少量 一次 一步 不断 持续"""
)


def _without_clitic(token: str) -> str:
    """"Amazon's" is the term "Amazon"; "isn't" or "we'll" names nothing (an empty
    token, dropped like a function word). Without this the stemmer made "amazon'"."""
    head, apostrophe, tail = token.rpartition("'")
    if not apostrophe or not head:
        return token
    tail = tail.casefold()
    if tail == "s":
        return head
    return "" if tail in _CONTRACTIONS else token


_CONTRACTIONS = frozenset({"t", "re", "ve", "ll", "d", "m"})


def stem(word: str) -> str:
    """A light English stemmer: enough to merge plurals and -ing/-ed forms."""
    w = word.casefold()
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 4 and w.endswith(("sses", "xes", "ches", "shes")):
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is", "os")):
        w = w[:-1]
    if len(w) > 6 and w.endswith("ing"):
        return w[:-3]
    if len(w) > 5 and w.endswith("ed") and not w.endswith("eed"):
        return w[:-2]
    return w


@dataclass(frozen=True)
class Terms:
    """One entry's terms: counts (title counted double) and which are in its title."""

    counts: Counter[str]
    in_title: frozenset[str]


class Vocabulary:
    """Tokenizes entries and remembers how each term was written."""

    def __init__(self, phrases: Iterable[str] = ()) -> None:
        self.phrases = frozenset(p for p in phrases if _CJK_RE.match(p))
        self._surface: dict[str, Counter[str]] = {}
        self._cut: Callable[[str], list[str]] | None = None
        # one grouping weighs the same entries more than once (theme profiles, then
        # sections from shared terms, each with the feed's history): tokenize each once
        self._terms: dict[tuple[str, str, str], Terms] = {}

    def surface(self, term: str) -> str:
        """How the term is usually written: lower case when it was ever written so
        (title case is not a spelling), else its most common form ("GRPO", "LSM-tree")."""
        forms = self._surface.get(term)
        if not forms:
            return term
        lower = {form: n for form, n in forms.items() if form == form.casefold()}
        return min((lower or forms).items(), key=lambda kv: (-kv[1], kv[0]))[0]

    def forms(self, term: str) -> list[str]:
        """Every spelling seen of a term, lower-cased, most common first."""
        seen: Counter[str] = Counter()
        for form, n in self._surface.get(term, Counter()).items():
            seen[form.casefold()] += n
        return [form for form, _ in sorted(seen.items(), key=lambda kv: (-kv[1], kv[0]))]

    def terms(self, item: Item) -> Terms:
        """An entry's terms, tokenized once per vocabulary."""
        key = (item.key, item.title, item.summary)
        found = self._terms.get(key)
        if found is None:
            found = self._terms[key] = self._tokenize(item)
        return found

    def _tokenize(self, item: Item) -> Terms:
        counts: Counter[str] = Counter()
        in_title: set[str] = set()
        for text, weight, is_title in ((item.title, TITLE_COUNT, True), (item.summary, 1, False)):
            for term in self.tokens(text):
                counts[term] += weight
                if is_title:
                    in_title.add(term)
        return Terms(counts, frozenset(in_title))

    def tokens(self, text: str) -> list[str]:
        """English words and two-word phrases, and Chinese words, of one text."""
        plain = unicodedata.normalize("NFKC", text)
        out: list[str] = []
        previous: tuple[str, str] | None = None  # (stem, surface) of the last content word
        for match in _EN_TOKEN_RE.finditer(_CJK_RUN_RE.sub(" | ", plain)):
            token = _without_clitic(match.group(0))
            low = token.casefold()
            if len(token) < 2 or not token[0].isalpha() or low in EN_STOPWORDS or (len(token) < 3 and token.islower()):
                previous = None
                continue
            key = stem(token)
            self._remember(key, token)
            out.append(key)
            if previous is not None:
                pair = f"{previous[0]} {key}"
                self._remember(pair, f"{previous[1]} {token}")
                out.append(pair)
            previous = (key, token)
        for run in _CJK_RUN_RE.findall(plain):
            for word in self._join(self._jieba()(run)):
                if _CJK_RE.match(word) and word not in ZH_STOPWORDS:
                    self._remember(word, word)
                    out.append(word)
        return out

    def _remember(self, term: str, written: str) -> None:
        self._surface.setdefault(term, Counter())[written] += 1

    def _jieba(self) -> Callable[[str], list[str]]:
        if self._cut is None:
            import rjieba  # imported lazily: loading its dictionary takes ~0.2 s

            self._cut = rjieba.cut
        return self._cut

    def _join(self, tokens: Sequence[str]) -> list[str]:
        """Greedily merge up to four adjacent tokens that spell a theme phrase
        (cheaper than a second jieba dictionary, and leaves the shared one alone)."""
        if not self.phrases:
            return list(tokens)
        joined: list[str] = []
        index = 0
        while index < len(tokens):
            for span in range(min(4, len(tokens) - index), 1, -1):
                candidate = "".join(tokens[index : index + span])
                if candidate in self.phrases:
                    joined.append(candidate)
                    index += span
                    break
            else:
                joined.append(tokens[index])
                index += 1
        return joined


@dataclass(frozen=True)
class Weighted:
    """TF-IDF vectors of a set of entries, unit length, and the terms' IDF."""

    vectors: dict[str, dict[str, float]]  # item key -> term -> weight
    idf: dict[str, float]
    terms: dict[str, Terms]


def weigh(
    items: Sequence[Item], vocab: Vocabulary, background: Sequence[Item] = (), max_terms: int = 24
) -> Weighted:
    """Unit TF-IDF vectors of ``items``.

    Document frequencies come from the items plus ``background`` (the feed's
    earlier entries, when the caller has them): with a feed's history, words
    every entry of that feed uses ("agent", "database") weigh little even in a
    week where they happen to be rare. Terms in more than ``MAX_DF_SHARE`` of
    the documents name no topic and are dropped; each vector keeps its
    ``max_terms`` heaviest terms, which keeps similarity cheap.
    """
    terms = {item.key: vocab.terms(item) for item in items}
    doc_freq: Counter[str] = Counter()
    for found in terms.values():
        doc_freq.update(found.counts.keys())
    linking = {t for t, df in doc_freq.items() if df >= 2}  # a term one entry has links nothing
    own = {item.key for item in items}
    extra = [item for item in background if item.key not in own]
    for item in extra:
        doc_freq.update(vocab.terms(item).counts.keys())
    total = len(items) + len(extra)
    ceiling = max(2, MAX_DF_SHARE * total)
    idf = {
        t: math.log((1 + total) / (1 + df)) + 1.0 for t, df in doc_freq.items() if t in linking and df <= ceiling
    }
    vectors = {}
    for key, found in terms.items():
        weights = {t: (1.0 + math.log(c)) * idf[t] for t, c in found.counts.items() if t in idf}
        top = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[:max_terms]
        norm = math.sqrt(sum(w * w for _, w in top)) or 1.0
        vectors[key] = {t: w / norm for t, w in top}
    return Weighted(vectors, idf, terms)


def one_chinese_word(first: str, second: str, texts: Sequence[str]) -> str | None:
    """Two Chinese terms that the entries write as one word ("信用" and "分配" in
    "信用分配", credit assignment: jieba cut it in two): that word, when most of
    ``texts`` (a section's or a theme's members) write it. Names and suggested
    keywords both use it: "分配" alone would name, or match, any allocation."""
    if not (CJK_CHAR_RE.search(first) and CJK_CHAR_RE.search(second)):
        return None
    for word in (first + second, second + first):
        if sum(word in text for text in texts) * 2 > len(texts):
            return word
    return None


def one_latin_phrase(first: str, second: str, texts: Sequence[str]) -> str | None:
    """Two Latin-script terms that the entries write as one phrase ("agentic
    reinforcement" and "learning" in "Agentic Reinforcement Learning"): the
    phrase as they most often write it, when most of ``texts`` have it. The
    last word may be plural ("neural radiance fields")."""
    if not (first.isascii() and second.isascii()):
        return None
    for a, b in ((first, second), (second, first)):
        words = [re.escape(w) for w in f"{a} {b}".split()]
        pattern = re.compile(r"(?<![A-Za-z0-9])" + r"[\s-]+".join(words) + r"(?:e?s)?(?![A-Za-z0-9])", re.IGNORECASE)
        written = Counter(found.group(0) for text in texts if (found := pattern.search(text)))
        if sum(written.values()) * 2 > len(texts):
            return " ".join(min(written.items(), key=lambda kv: (-kv[1], kv[0]))[0].split())
    return None
