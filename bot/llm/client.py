"""Calling the model: the official ``openai`` client, and what keeps a slow or
broken endpoint from hurting the bot.

- a timeout per call (``DIGESTBOT_LLM_TIMEOUT``);
- retries with exponential backoff on 429 (honouring ``Retry-After``), 5xx,
  timeouts and refused connections (``RETRIES`` after the first try);
- a circuit breaker: after ``BREAKER_AFTER`` calls in a row that failed for good,
  the endpoint is left alone for ``BREAKER_COOL`` seconds (calls fail at once);
- a daily budget (``DIGESTBOT_LLM_DAILY_CALLS``, every try counts), kept in
  the database so the CLI and the service share it;
- a server that refuses ``response_format`` with a JSON schema (400) is asked
  again for a plain JSON object, and the answer parsed strictly.

The key goes to the client and nowhere else: error messages carry the status
and the server's short reason, never the request's headers.
"""

from __future__ import annotations

import email.utils
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import openai

from bot.config import Settings
from bot.llm.answer import AnswerError, content_of

log = logging.getLogger(__name__)

RETRIES = 3
BACKOFF = 1.0  # seconds before the first retry, doubled each time
MAX_WAIT = 60.0  # no wait (a Retry-After included) is longer than this
BREAKER_AFTER = 3
BREAKER_COOL = 300.0


class CallError(Exception):
    """A call that failed for good; ``reason`` is short and safe to show (no key, no body)."""

    def __init__(self, reason: str, transient: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.transient = transient  # worth trying again at the next poll


class BudgetSpent(CallError):
    """Today's calls are spent: not the endpoint's fault (the breaker ignores it)."""


class Budget:
    """The calls left today; ``take`` one before each try. Thread-safe."""

    def __init__(self, limit: int, used: int = 0) -> None:
        self.limit, self.used = limit, used
        self._lock = threading.Lock()

    def take(self) -> None:
        with self._lock:
            if self.used >= self.limit:
                raise BudgetSpent(f"the daily budget of {self.limit} calls is spent (DIGESTBOT_LLM_DAILY_CALLS)")
            self.used += 1


class Breaker:
    """Opens after ``after`` failures in a row; stays open ``cool`` seconds."""

    def __init__(self, after: int = BREAKER_AFTER, cool: float = BREAKER_COOL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.after, self.cool, self.clock = after, cool, clock
        self.failures = 0
        self.opened_at: float | None = None
        self._lock = threading.Lock()

    def check(self) -> None:
        with self._lock:
            if self.opened_at is not None and self.clock() - self.opened_at < self.cool:
                raise CallError(f"the endpoint failed {self.failures} times in a row; left alone for "
                                f"{self.cool:g} s (circuit open)")

    def record(self, ok: bool) -> None:
        with self._lock:
            self.failures = 0 if ok else self.failures + 1
            self.opened_at = None if ok else (self.clock() if self.failures >= self.after else self.opened_at)


def retry_after(headers: Any) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (a number or an HTTP date), or None."""
    value = headers.get("retry-after") if headers is not None else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _status_reason(exc: openai.APIStatusError) -> str:
    detail = ""
    try:
        body = exc.response.json()
        message = body.get("error", {}).get("message") if isinstance(body, dict) else None
        detail = f": {' '.join(str(message).split())[:120]}" if message else ""
    except ValueError:
        pass
    return f"the endpoint answered {exc.status_code}{detail}"


class Caller:
    """Sends chat-completions bodies to one endpoint and returns the answers' text."""

    def __init__(self, settings: Settings, budget: Budget, breaker: Breaker | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 on_call: Callable[[bool, str], None] | None = None) -> None:
        self.client = openai.OpenAI(base_url=settings.llm_base_url, api_key=settings.llm_key() or "none",
                                    timeout=settings.llm_timeout, max_retries=0)
        self.model = settings.llm_model or ""
        self.budget, self.breaker = budget, breaker or Breaker()
        self.sleep, self.on_call = sleep, on_call
        self.structured = True  # until the server refuses a JSON schema

    def complete(self, body: dict[str, Any], plain_body: dict[str, Any] | None = None) -> str:
        """The answer's text for ``body`` (``plain_body`` when the server takes no JSON schema);
        CallError when every try failed."""
        self.breaker.check()
        try:
            content = self._with_retries(body if self.structured or plain_body is None else plain_body,
                                         plain_body)
        except BudgetSpent as exc:
            self._report(False, exc.reason)
            raise
        except CallError as exc:
            self.breaker.record(False)
            self._report(False, exc.reason)
            raise
        self.breaker.record(True)
        self._report(True, "")
        return content

    def _report(self, ok: bool, reason: str) -> None:
        if self.on_call is not None:
            self.on_call(ok, reason)

    def _with_retries(self, body: dict[str, Any], plain_body: dict[str, Any] | None) -> str:
        reason, wait = "", 0.0
        for attempt in range(RETRIES + 1):
            if attempt:
                self.sleep(wait)
            self.budget.take()
            try:
                return content_of(self.client.chat.completions.create(**body))
            except openai.APITimeoutError:
                reason, wait = "the call outlasted DIGESTBOT_LLM_TIMEOUT", BACKOFF * 2 ** attempt
            except openai.APIConnectionError:
                reason, wait = "the endpoint cannot be reached", BACKOFF * 2 ** attempt
            except openai.APIStatusError as exc:
                reason = _status_reason(exc)
                if exc.status_code == 400 and plain_body is not None and body is not plain_body:
                    log.info("the model endpoint takes no JSON schema; asking for a JSON object")
                    self.structured, body = False, plain_body
                    wait = 0.0
                    continue
                if exc.status_code == 429:
                    asked = retry_after(exc.response.headers)
                    wait = asked if asked is not None else BACKOFF * 2 ** attempt
                elif exc.status_code >= 500:
                    wait = BACKOFF * 2 ** attempt
                else:
                    raise CallError(reason, transient=exc.status_code in (401, 403, 404, 408)) from None
            except AnswerError as exc:
                raise CallError(str(exc), transient=False) from None
            wait = min(MAX_WAIT, wait)
        raise CallError(f"{reason} ({RETRIES + 1} tries)")
