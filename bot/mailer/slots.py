"""Personal links go only where our own templates put them.

A digest is rendered once and personalised per recipient by putting each
reader's unsubscribe URL in place of ``UNSUBSCRIBE_PLACEHOLDER``. If feed text
could carry that string (an item link ``http://evil.example/t?u=__DIGESTBOT_UNSUBSCRIBE_URL__``),
every reader's own link would be filled into the feed's URL too, and a feed
could collect them all. So the templates are rendered with a random slot
marker made for this one digest, which no feed can know in advance; in the
result, any placeholder (which can only have come from outside) is
neutralised, and then the slot markers, and only they, become placeholders.
"""

from __future__ import annotations

import secrets

from bot.mailer.message import PREFERENCES_PLACEHOLDER, UNSUBSCRIBE_PLACEHOLDER

# what a placeholder in feed text becomes: readable, and never a placeholder again
NEUTRALISED = "DIGESTBOT-UNSUBSCRIBE-URL"
NEUTRALISED_PREFERENCES = "DIGESTBOT-PREFERENCES-URL"


def new_slot() -> str:
    """A slot marker for one digest: 128 random bits, plain ASCII, unchanged by
    HTML escaping, CSS inlining and base64."""
    return f"__DIGESTBOT_SLOT_{secrets.token_hex(16)}__"


def neutralise(text: str) -> str:
    """``text`` without the placeholder (repeated until none is left: removing
    one must not join its neighbours into another)."""
    while UNSUBSCRIBE_PLACEHOLDER in text or PREFERENCES_PLACEHOLDER in text:
        text = text.replace(UNSUBSCRIBE_PLACEHOLDER, NEUTRALISED).replace(
            PREFERENCES_PLACEHOLDER, NEUTRALISED_PREFERENCES)
    return text


def mark_slots(body: str, slot: str, preferences_slot: str | None = None) -> str:
    """A rendered part with every ``slot`` turned into the unsubscribe
    placeholder (and every ``preferences_slot`` into the preferences one) and
    every other placeholder neutralised, so the send fills in exactly the
    slots the template made."""
    expected = body.count(slot)
    marked = neutralise(body).replace(slot, UNSUBSCRIBE_PLACEHOLDER)
    expected_choose = 0
    if preferences_slot is not None:
        expected_choose = body.count(preferences_slot)
        marked = marked.replace(preferences_slot, PREFERENCES_PLACEHOLDER)
    if (marked.count(UNSUBSCRIBE_PLACEHOLDER) != expected  # text next to a slot formed another
            or marked.count(PREFERENCES_PLACEHOLDER) != expected_choose):
        raise RuntimeError("a personal link slot could not be placed safely")
    return marked
