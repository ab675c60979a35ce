"""A model's answer checked on arrival: parsed strictly, validated against the
themes file and the entry's own text, and cleaned to plain capped text. No I/O.

The answer is data from a machine that read untrusted feed text, so nothing in
it is trusted: a theme key must be one of the themes file's keys, a paper must
be named in the entry itself, and every sentence loses markup and links.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

CONFIDENT = 0.6  # from this confidence the model's primary theme decides the entry's section
MAX_REASON = 200
MAX_TLDR = 240
MAX_INTRO = 400
MAX_PAPER = 160
MAX_PAPERS = 6

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)
_THINKING = re.compile(r"^<think>.*?</think>\s*", re.S)  # what reasoning models write before the answer
_TAG = re.compile(r"<[^>]{0,200}>")
_LINK = re.compile(r"(?i)\b(?:https?://|www\.)\S+|\b[\w.-]+@[\w-]+\.[\w.]+")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s")


class AnswerError(ValueError):
    """The model's answer is not what was asked for (the reason says what)."""


def _empty() -> Mapping[str, str]:
    return MappingProxyType({})


@dataclass(frozen=True)
class Reading:
    """What the model read in one entry, validated."""

    model: str
    primary: str | None
    secondary: tuple[str, ...] = ()
    confidence: float = 0.0
    reason: str = ""
    papers: tuple[str, ...] = ()
    tldr: Mapping[str, str] = field(default_factory=_empty)

    @property
    def confident(self) -> bool:
        """Sure enough of a theme for it to decide the entry's section."""
        return self.primary is not None and self.confidence >= CONFIDENT

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "primary": self.primary, "secondary": list(self.secondary),
                "confidence": self.confidence, "reason": self.reason, "papers": list(self.papers),
                "tldr": dict(self.tldr)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Reading:
        return cls(model=str(data["model"]), primary=data.get("primary"),
                   secondary=tuple(data.get("secondary") or ()), confidence=float(data.get("confidence", 0.0)),
                   reason=str(data.get("reason", "")), papers=tuple(data.get("papers") or ()),
                   tldr=MappingProxyType(dict(data.get("tldr") or {})))


def plain(text: Any, limit: int) -> str:
    """Plain one-line text: no markup, no links or addresses, no control characters, at most
    ``limit`` characters (cut after a sentence when one ends in the second half)."""
    if not isinstance(text, str):
        return ""
    text = _LINK.sub("", _TAG.sub(" ", text))
    text = "".join(ch for ch in text if unicodedata.category(ch)[0] != "C" or ch in " \t\n")
    text = " ".join(text.replace("<", " ").replace(">", " ").split())
    if len(text) <= limit:
        return text
    cut = text[:limit]
    ends = [m.start() for m in _SENTENCE_END.finditer(cut + " ")]
    good = [end for end in ends if end >= limit // 2]
    return cut[: good[-1]].rstrip() if good else cut.rstrip() + "…"


def content_of(response: Any) -> str:
    """The text of a chat-completions response (a dict or the client's object)."""
    if isinstance(response, str):
        return response
    data = response if isinstance(response, Mapping) else response.model_dump()
    try:
        content = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise AnswerError("the response holds no message") from exc
    if not isinstance(content, str):
        raise AnswerError("the response's message has no text")
    return content


def parse_object(content: str) -> dict[str, Any]:
    """One JSON object, alone (a reasoning model's leading <think> block and a Markdown code
    fence around it are taken off)."""
    text = _THINKING.sub("", content.strip())
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AnswerError(f"the answer is not JSON ({exc.msg} at character {exc.pos})") from exc
    if not isinstance(data, dict):
        raise AnswerError("the answer is not a JSON object")
    return data


def _normal(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _papers(value: Any, entry_text: str) -> tuple[str, ...]:
    """The named papers the entry itself writes (a name it does not write is dropped)."""
    if not isinstance(value, list):
        return ()
    haystack = _normal(entry_text)
    kept: list[str] = []
    for paper in value:
        name = plain(paper, MAX_PAPER)
        if name and _normal(name) in haystack and name not in kept:
            kept.append(name)
    return tuple(kept[:MAX_PAPERS])


def _confidence(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise AnswerError("the answer's confidence is not a number")
    return min(1.0, max(0.0, float(value)))


def parse_reading(content: str, model: str, keys: Sequence[str], languages: Sequence[str],
                  entry_text: str) -> Reading:
    """An entry's reading from the model's answer text, or AnswerError saying what is wrong.

    The primary key must be one of ``keys`` (or null); unknown secondary keys are
    dropped; papers must be written in ``entry_text``; every sentence is plain text.
    """
    data = parse_object(content)
    primary = data.get("primary")
    if primary in ("", "null", "none"):
        primary = None
    if primary is not None and (not isinstance(primary, str) or primary not in keys):
        raise AnswerError(f"the answer names no theme of the themes file ({plain(str(primary), 60)!r})")
    secondary_value = data.get("secondary")
    secondary = tuple(dict.fromkeys(key for key in (secondary_value if isinstance(secondary_value, list) else [])
                                    if isinstance(key, str) and key in keys and key != primary))[:2]
    tldr_value = data.get("tldr")
    tldr = {code: plain(tldr_value.get(code), MAX_TLDR) for code in languages} \
        if isinstance(tldr_value, Mapping) else {}
    return Reading(
        model=model, primary=primary, secondary=secondary, confidence=_confidence(data.get("confidence")),
        reason=plain(data.get("reason"), MAX_REASON), papers=_papers(data.get("papers"), entry_text),
        tldr=MappingProxyType({code: text for code, text in tldr.items() if text}),
    )


def parse_intro(content: str) -> str:
    """A section's introduction from the model's answer: plain text, capped."""
    text = plain(parse_object(content).get("intro"), MAX_INTRO)
    if not text:
        raise AnswerError("the answer holds no introduction")
    return text
