"""Extract the names of the papers a feed entry covers from its title.

The feed is a stream of Chinese "deep reads" (精读) of RL / LLM-agent papers.
Titles follow a handful of house styles, and the rules below mirror them:

* ``NAME: English subtitle 精读`` / ``NAME：中文副标题`` / ``NAME 精读：…`` -- one
  paper.  The name is whatever precedes the first colon, dash or reading
  marker, so an acronym-less paper yields its title
  (``Up and Down the Abstraction Ladder``).
* ``A × B × C 精读：…`` / ``A×B：…`` -- several papers joined by ``×`` (or a
  spaced ``x``).  Items may be mixed-script topics such as
  ``EOS 终止符失配``; ``×`` is an explicit pairing operator, so such an item is
  kept whole as long as it *starts* with a real Latin name.
* ``中文主题四重奏：…——A、B、C、D 合读`` -- a Chinese headline with the names
  listed later, separated by ``、`` / ``，``.  Outside the head we only
  accept a segment that is purely a list of Latin names, otherwise Chinese
  prose that merely mentions a product or forum (``PAI 分论坛上``) would leak in.
* ``信号质量二重奏：CoVer 验证器…与 DENSE 轨迹蒸馏精读`` -- names embedded in
  prose.  Only when the title announces an ensemble (二重奏/三重奏/合读/三条线…)
  do we scan the prose, and then only for code-like tokens (acronyms,
  CamelCase, digits).

Only a title that reads like a paper write-up is searched at all
(``reads_like_writeup``): one with a reading marker (精读, 合读, ...), an
ensemble word (二重奏, ...), names paired with ``×``, or a head of acronym-like
names before a colon (``FLARE：…``, ``CoVer与DENSE：…``). A blog post's title
("How PostgreSQL 18 uses asynchronous I/O") is none of these, so a feed of
blog posts yields no "papers".

Precision beats recall: a digest that silently omits a paper name is fine, one
that lists "Agent" or "token" as a paper is not.  Therefore field vocabulary
(Agent, LLM, RL, token, Harness, GRPO, …) never counts as a name on its own,
purely Chinese items are dropped, ASCII ``,`` never splits (paper titles such
as ``One to More, More to One`` contain commas), and ``and``/``与`` only split
when both sides are code-like tokens.  Every returned name is a substring of
the whitespace-normalised title and at most 80 characters long.
"""

from __future__ import annotations

import re

__all__ = ["extract_papers", "reads_like_writeup"]

MAX_NAME_LEN = 80

# Field vocabulary that is never a paper name by itself (compared casefolded,
# word by word: an item made only of these words is rejected).
# fmt: off
STOPWORDS = frozenset({
    "agent", "agents", "agentic", "ai", "llm", "llms", "lm", "lms", "vlm", "mllm",
    "rl", "rlvr", "rlhf", "token", "tokens", "harness", "swe", "gui", "ppo",
    "grpo", "dpo", "sft", "moe", "lora", "api", "mcp", "cot", "prm", "orm",
    "gpu", "cpu", "sota", "on", "off", "policy", "benchmark", "model", "models",
    # venues and preprint servers: "SIGMOD: learned cardinality estimation" names
    # where a paper appeared, not the paper (a digest once counted one such as "1 paper")
    "arxiv", "sigmod", "vldb", "pvldb", "icde", "cidr", "pods", "neurips", "nips", "icml",
    "iclr", "cvpr", "iccv", "eccv", "acl", "emnlp", "naacl", "aaai", "ijcai", "kdd",
    "sigir", "recsys", "www", "wsdm", "cikm", "osdi", "sosp", "nsdi", "eurosys", "asplos",
    "isca", "usenix", "ndss", "ccs", "oakland",
})
# fmt: on

_SEP = "\n"  # internal segment separator; never survives whitespace normalisation

_WS_RE = re.compile(r"\s+")
_PAREN_RE = re.compile(r"（[^（）]*）|\([^()]*\)")
# Reading markers end the name part of a segment: 精读, 合读, …
_MARKER_RE = re.compile(r"(?:精读|合读|导读|解读|速读)")
# Segment boundaries: CJK colon, ASCII colon followed by space/end/CJK (never
# "10:30"), em dashes, and a question mark ending an English title
# ("Does X Really Distill? From …" -- the "?" stays with the name).
_SEGMENT_RE = re.compile(r"：|:(?=[\s\u3000-\u9fff]|$)|—+|(?<=\?)\s+")
# Pairing operator between names: ×, or a lowercase x surrounded by spaces
# (an uppercase X is too often part of a name, e.g. "Model X").
_PAIR_RE = re.compile(r"\s*×\s*|\s+x\s+")
_LIST_RE = re.compile(r"[、，；;]")
_AND_RE = re.compile(r"\s*(?:与|和|及|&)\s*|\s+and\s+")
# Titles that announce several papers discussed together.
_ENSEMBLE_RE = re.compile(
    r"[二两双三四五六七八九十多]重奏|合读|[二两三四五六七八九十多]条线|[二两双三四]视角"
)
# Quote marks stripped from item edges (not apostrophes: "Mo' Models").
_QUOTES = '「」『』《》〈〉“”" '
# A Latin "word": letters/digits plus name-internal punctuation.
_LATIN_WORD = r"[A-Za-z0-9][A-Za-z0-9'’\-–.+/&]*"
_LATIN_RUN_RE = re.compile(rf"{_LATIN_WORD}(?: {_LATIN_WORD})*")
_PURE_LATIN_RE = re.compile(r"[A-Za-z0-9][\x20-\x7e’‘–]*")
_CJK_RE = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]")


def _normalise(title: str) -> str:
    return _WS_RE.sub(" ", title).strip()


def _clean(item: str) -> str:
    return item.strip().strip(_QUOTES).strip()


def _words(item: str) -> list[str]:
    return [w for w in re.split(r"[\s\-–]+", item.casefold()) if w]


def _is_stop(item: str) -> bool:
    words = _words(item)
    # a year beside field words or a venue ("NeurIPS 2025") names no paper either
    return not words or (all(w in STOPWORDS or w.isdigit() for w in words)
                         and not all(w.isdigit() for w in words))


def _is_code_like(word: str) -> bool:
    """Acronym / CamelCase / digit-bearing token such as DARS, CoVer, T2SPO."""
    if not re.fullmatch(_LATIN_WORD, word) or _is_stop(word):
        return False
    uppers = sum(c.isupper() for c in word)
    has_digit = any(c.isdigit() for c in word)
    inner_upper = any(c.isupper() for c in word[1:])
    return any(c.isalpha() for c in word) and (uppers >= 2 or inner_upper or has_digit)


def _is_pure_latin_name(item: str) -> bool:
    return (
        bool(_PURE_LATIN_RE.fullmatch(item))
        and any(c.isalpha() for c in item)
        and not _is_stop(item)
        and len(item) <= MAX_NAME_LEN
    )


def _leading_name(item: str) -> str | None:
    """The Latin name a mixed-script item starts with, if it is a real name."""
    m = _LATIN_RUN_RE.match(item)
    if not m:
        return None
    run = m.group(0)
    if _is_stop(run) or not any(_is_code_like(w) for w in run.split()):
        return None
    return run


def _split_and(item: str) -> list[str]:
    """Split ``A 与 B`` / ``A and B`` only when every part is code-like."""
    parts = [_clean(p) for p in _AND_RE.split(item)]
    if len(parts) > 1 and all(_is_code_like(p) for p in parts):
        return parts
    return [item]


def _segment_items(segment: str) -> tuple[list[str], bool]:
    """Split a segment into candidate items; flag whether ``×`` paired them."""
    paired = _PAIR_RE.split(segment)
    items: list[str] = []
    for chunk in paired:
        for piece in _LIST_RE.split(chunk):
            piece = _clean(piece)
            if piece:
                items.extend(_split_and(piece))
    return items, len(paired) > 1


def _names_from_head(segment: str) -> list[str]:
    items, paired = _segment_items(segment)
    names: list[str] = []
    for item in items:
        if _is_pure_latin_name(item):
            names.append(item)
        elif _CJK_RE.search(item):
            if paired and _LATIN_RUN_RE.match(item) and len(item) <= MAX_NAME_LEN:
                # "EOS 终止符失配": × makes the whole topic one entry.
                if _leading_name(item) is not None:
                    names.append(item)
            elif len(items) == 1:
                lead = _leading_name(item)
                if lead is not None:
                    names.append(lead)
    return names


def _names_from_tail(segment: str) -> list[str]:
    """A later segment counts only if it is a clean list of Latin names."""
    items, _ = _segment_items(segment)
    if not items or not all(_is_pure_latin_name(i) for i in items):
        return []
    if len(items) == 1 and not any(_is_code_like(w) for w in items[0].split()):
        return []
    return items


def _names_from_prose(segments: list[str]) -> list[str]:
    names: list[str] = []
    for segment in segments:
        for m in _LATIN_RUN_RE.finditer(segment):
            run = m.group(0).strip()
            if not _is_stop(run) and any(_is_code_like(w) for w in run.split()):
                names.append(run)
    return names


def _dedupe(names: list[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for name in names:
        name = _normalise(name)
        key = name.casefold()
        if name and key not in seen and len(name) <= MAX_NAME_LEN:
            seen.add(key)
            out.append(name)
    return out


# the first colon of a title: the end of a "NAME: subtitle" head
_HEAD_COLON_RE = re.compile(r"：|:(?=[\s\u3000-\u9fff]|$)")


def reads_like_writeup(title: str) -> bool:
    """Does the title announce a write-up of papers (see the module docstring)?"""
    text = _normalise(title)
    if _MARKER_RE.search(text) or _ENSEMBLE_RE.search(text):
        return True
    chinese = bool(_CJK_RE.search(text))
    # "A × B"; a spaced "x" only in a Chinese title ("Rust x Python" is a blog's)
    if "×" in text or (chinese and len(_PAIR_RE.split(text)) > 1):
        return True
    head = _HEAD_COLON_RE.split(_PAREN_RE.sub(" ", text), maxsplit=1)
    if len(head) < 2:
        return False
    items, _ = _segment_items(head[0])
    if not items or not all(_is_code_like(item) for item in items):
        return False
    # "FooNet：中文副标题", or an acronym ("FLARE: ..."); not "TypeScript: the good parts"
    return bool(_CJK_RE.search(head[1])) or not any(c.islower() for item in items for c in item)


def extract_papers(title: str) -> list[str]:
    """Paper names an entry covers, in title order, de-duplicated, each stripped;
    none for a title that does not read like a paper write-up."""
    text = _normalise(title)
    if not text or not reads_like_writeup(text):
        return []
    text = _PAREN_RE.sub(_SEP, text)
    text = _MARKER_RE.sub(_SEP, text)
    text = _SEGMENT_RE.sub(_SEP, text)
    segments = [s.strip() for s in text.split(_SEP) if s.strip()]
    if not segments:
        return []

    names = _names_from_head(segments[0])
    if names:
        return _dedupe(names)
    for segment in segments[1:]:
        names = _names_from_tail(segment)
        if names:
            return _dedupe(names)
    if _ENSEMBLE_RE.search(title):
        return _dedupe(_names_from_prose(segments))
    return []
