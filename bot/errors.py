"""Errors written for the person running digestbot.

Every error the library raises on purpose is a ``BotError``: it carries a
message that says what went wrong and, where we can tell, a hint on what to
do about it. The CLI prints these without a traceback; anything else is a bug.
"""

from __future__ import annotations


class BotError(Exception):
    """A failure the user can act on."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  hint: {self.hint}"
        return self.message


class ConfigError(BotError):
    """A setting is missing or has a value we cannot use."""


class DatabaseError(BotError):
    """The database cannot be reached or is not at the expected schema."""


class FeedError(BotError):
    """One feed could not be fetched or parsed; other feeds carry on."""


class ThemesError(BotError):
    """The themes file is missing or malformed."""


class DeliveryError(BotError):
    """Mail could not be handed to the transport."""
