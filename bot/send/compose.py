"""Turning a ledger row into the bytes of its message: the copy for the
reader's theme choice, with the reader's own unsubscribe link (and its token in
the List-Unsubscribe mailto:) and "choose your themes" link."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from bot.mailer import DigestMessage, new_message_id
from bot.send.ledger import LedgerRow
from bot.tokens import Tokens, preferences_url, unsubscribe_url


class Copies(Protocol):
    """The messages per theme choice (``bot.send.variants.CopyBook``; a dict will do)."""

    def get(self, choice: str, default: DigestMessage, /) -> DigestMessage: ...


class DigestComposer:
    """Personalises a ``DigestMessage``: the recipient's links and Message-ID.

    ``variants`` holds the copy for each theme choice the ledger's rows carry
    (``bot.send.variants.CopyBook``), each built once per run and shared by
    every worker; a row without a choice gets ``message``, the whole digest."""

    def __init__(self, message: DigestMessage, tokens: Tokens, base_url: str,
                 variants: Copies | None = None) -> None:
        self.message = message
        self.tokens = tokens
        self.base_url = base_url
        self.variants: Copies = variants if variants is not None else {}
        self._tokens: dict[int, tuple[str, str]] = {}

    def new_message_id(self) -> str:
        return new_message_id(self.message.domain)

    def prepare(self, rows: Sequence[LedgerRow]) -> None:
        # signing a batch in one go is several times cheaper per token than
        # signing between two SMTP transactions (warm caches)
        self._tokens = {row.id: self._token(row) for row in rows}

    def _token(self, row: LedgerRow) -> tuple[str, str]:
        """(unsubscribe token, preferences token) of the row's reader."""
        return (self.tokens.unsubscribe_token(row.subscriber_id, row.email_key),
                self.tokens.preferences_token(row.subscriber_id, row.email_key))

    def message_for(self, row: LedgerRow) -> DigestMessage:
        """The copy this row gets: its theme choice's, else the whole digest."""
        if row.themes is None:
            return self.message
        return self.variants.get(row.themes, self.message)

    def compose(self, row: LedgerRow, message_id: str) -> bytes:
        # one token in the link and in the List-Unsubscribe mailto: subject
        prepared = self._tokens.pop(row.id, None)
        token, choose = prepared if prepared is not None else self._token(row)
        return self.message_for(row).render(row.email, message_id, unsubscribe_url(self.base_url, token),
                                            preferences_url=preferences_url(self.base_url, choose),
                                            unsubscribe_token=token)
