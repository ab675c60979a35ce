"""Turning a ledger row into the bytes of its message: the digest, with the
recipient's own unsubscribe link and List-Unsubscribe mailto: token."""

from __future__ import annotations

from collections.abc import Sequence

from bot.mailer import DigestMessage, new_message_id
from bot.send.ledger import LedgerRow
from bot.tokens import Tokens, unsubscribe_url


class DigestComposer:
    """Personalises a ``DigestMessage``: the recipient's unsubscribe link and Message-ID."""

    def __init__(self, message: DigestMessage, tokens: Tokens, base_url: str) -> None:
        self.message = message
        self.tokens = tokens
        self.base_url = base_url

        self._tokens: dict[int, str] = {}

    def new_message_id(self) -> str:
        return new_message_id(self.message.domain)

    def prepare(self, rows: Sequence[LedgerRow]) -> None:
        # signing a batch in one go is several times cheaper per token than
        # signing between two SMTP transactions (warm caches)
        self._tokens = {row.id: self._token(row) for row in rows}

    def _token(self, row: LedgerRow) -> str:
        return self.tokens.unsubscribe_token(row.subscriber_id, row.email_key)

    def compose(self, row: LedgerRow, message_id: str) -> bytes:
        # one token in the link and in the List-Unsubscribe mailto: subject
        token = self._tokens.pop(row.id, None) or self._token(row)
        return self.message.render(row.email, message_id, unsubscribe_url(self.base_url, token),
                                   unsubscribe_token=token)
