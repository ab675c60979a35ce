"""Why an entry is where it is, as data and as lines for the admin's terminal.

This is operator output (`digestbot preview --explain`), not digest text, so it is plain
English like the rest of the command line. Each reader's points are shown side by side.
"""

from __future__ import annotations

from typing import Any

from bot.themes.model import Explanation, ThemeScore

REASONS = {
    "best_theme": "its best theme",
    "readers": "the readers' points together put it here, over its keywords' own choice",
    "lone_theme": "its best theme, kept although alone on it this week (within max_sections)",
    "fallback_theme": "its next-best theme: its best theme's section was dissolved to fit max_sections",
    "shared_terms": "shares distinctive terms with the other entries of this section",
    "themes_do_not_fit": "the themes file fits too few of its feed's recent entries: grouped by shared terms",
    "no_theme": "no theme reached min_score with the readers' points together",
    "over_cap": "its section was dissolved to stay within max_sections and no other theme fits",
}


def explanation_json(why: Explanation) -> dict[str, Any]:
    """Plain data for `--format json`: the reason, each reader's vote, the keyword hits."""
    return {
        "reason": why.reason,
        "theme": why.theme_key,
        "shared_terms": list(why.shared_terms),
        "readers": {vote.reader: {"points": {k: round(v, 2) for k, v in vote.points.items()},
                                  "reasons": dict(vote.reasons), "decides": vote.decides}
                    for vote in why.votes},
        "scores": [_score_json(score) for score in why.top],
    }


def _score_json(score: ThemeScore) -> dict[str, Any]:
    return {
        "theme": score.theme_key,
        "score": round(score.score, 2),
        "hits": [
            {"term": hit.term, "field": hit.field, "count": hit.count, "points": hit.points,
             }
            for hit in score.hits
        ],
    }


def _themes_shown(why: Explanation, limit: int = 3) -> list[str]:
    """The themes worth a line: the one it landed in, then the most points overall."""
    totals: dict[str, float] = {}
    for vote in why.votes:
        for key, points in vote.points.items():
            totals[key] = totals.get(key, 0.0) + points
    ranked = sorted(totals, key=lambda key: (-totals[key], key))
    if why.theme_key and why.theme_key in ranked:
        ranked.remove(why.theme_key)
        ranked.insert(0, why.theme_key)
    return ranked[:limit]


def explanation_lines(why: Explanation, max_hits: int = 6) -> list[str]:
    """A few indented lines for `--format text`: per theme, each reader's points side by side."""
    lines = [f"    why: {why.reason} ({REASONS.get(why.reason, why.reason)})"]
    if why.shared_terms:
        lines.append(f"    shared terms: {', '.join(why.shared_terms)}")
    readers = [vote.reader for vote in why.votes]
    for key in _themes_shown(why):
        cells = [f"{vote.reader} {vote.points.get(key, 0.0):g}" for vote in why.votes]
        total = sum(vote.points.get(key, 0.0) for vote in why.votes)
        lines.append(f"    {key}: {total:g} = " + " + ".join(cells))
        for vote in why.votes:
            if vote.reasons.get(key) and vote.reader != "keywords":
                lines.append(f"      {vote.reader}: {vote.reasons[key]}")
    decided = [vote for vote in why.votes if vote.decides]
    for vote in decided:
        lines.append(f"    {vote.reader} decides {vote.decides}")
    for score in why.top:
        hits = ", ".join(
            f"{hit.term} [{hit.field}{'x' + str(hit.count) if hit.count > 1 else ''}"
            f"] +{hit.points:g}"
            for hit in score.hits[:max_hits]
        )
        more = f", … {len(score.hits) - max_hits} more" if len(score.hits) > max_hits else ""
        lines.append(f"    keywords for {score.theme_key}: {score.score:g}  {hits}{more}")
    if not why.top:
        lines.append("    no theme keyword found")
    if not readers:
        lines.append("    (no reader ran: its feed is grouped by shared terms)")
    return lines
