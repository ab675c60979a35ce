"""Why an entry is where it is, as data and as lines for the admin's terminal.

This is operator output (`digestbot preview --explain`), not digest text, so
it is plain English like the rest of the command line.
"""

from __future__ import annotations

from typing import Any

from bot.themes.model import Explanation, ThemeScore

REASONS = {
    "best_theme": "its best theme",
    "lone_theme": "its best theme, kept although alone on it this week (within max_sections)",
    "fallback_theme": "its next-best theme: its best theme's section was dissolved to fit max_sections",
    "feed_terms": "its keywords left it undecided; it shares the most terms with this theme's clear entries",
    "learned": ("the learned model (its words, and its sentence vector where it has one) leans to this theme"
                " over its keywords' choice"),
    "weak_theme": "below min_score, but its keywords lean plainly to a theme with a section this week",
    "shared_terms": "shares distinctive terms with the other entries of this section",
    "themes_do_not_fit": "the themes file fits too few of the feed's recent entries: grouped by shared terms",
    "no_theme": "no theme reached min_score with a title keyword or two summary keywords",
    "over_cap": "its section was dissolved to stay within max_sections and no other theme fits",
}


def explanation_json(why: Explanation) -> dict[str, Any]:
    """Plain data for `--format json`."""
    return {
        "reason": why.reason,
        "theme": why.theme_key,
        "shared_terms": list(why.shared_terms),
        "feed_terms": {"points": why.feed_points, "terms": list(why.feed_terms)},
        "learned": {"points": why.learned_points, "words": list(why.learned_words),
                    "sentence": why.learned_sentence,
                    "neighbours": None if why.learned_votes is None
                    else {"on_theme": why.learned_votes[0], "of": why.learned_votes[1]}},
        "scores": [_score_json(score) for score in why.top],
    }


def _score_json(score: ThemeScore) -> dict[str, Any]:
    return {
        "theme": score.theme_key,
        "score": round(score.score, 2),
        "hits": [
            {"term": hit.term, "field": hit.field, "count": hit.count, "points": hit.points,
             **({"discounted": True} if hit.discounted else {})}
            for hit in score.hits
        ],
    }


def explanation_lines(why: Explanation, max_hits: int = 6) -> list[str]:
    """A few indented lines for `--format text`."""
    lines = [f"    why: {why.reason} ({REASONS.get(why.reason, why.reason)})"]
    if why.shared_terms:
        lines.append(f"    shared terms: {', '.join(why.shared_terms)}")
    if why.feed_points:
        lines.append(f"    feed terms: +{why.feed_points:g} for terms shared with this theme's clear entries"
                     f" ({', '.join(why.feed_terms) or 'none in particular'})")
    if why.learned_points:
        sentence = ""
        if why.learned_sentence is not None:
            votes = ("" if why.learned_votes is None else
                     f"; {why.learned_votes[0]} of the {why.learned_votes[1]} nearest labelled entries are on it")
            sentence = f" and the sentence model (probability {why.learned_sentence:g} for this theme{votes})"
        lines.append(f"    learned: +{why.learned_points:g} from the word model"
                     f" ({', '.join(why.learned_words) or 'no word in particular'}){sentence}")
    for score in why.top:
        hits = ", ".join(
            f"{hit.term} [{hit.field}{'x' + str(hit.count) if hit.count > 1 else ''}"
            f"{', after a contrast' if hit.discounted else ''}] +{hit.points:g}"
            for hit in score.hits[:max_hits]
        )
        more = f", … {len(score.hits) - max_hits} more" if len(score.hits) > max_hits else ""
        lines.append(f"    {score.theme_key}: {score.score:g}  {hits}{more}")
    if not why.top:
        lines.append("    no theme keyword found")
    return lines
