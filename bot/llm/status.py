"""Whether the language-model reader works, for `digestbot status` and /healthz:
last success, last failure with its reason, calls and cache hits today. Never the key."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from bot.config import Settings
from bot.llm import store


def report(session: Session, settings: Settings, now: datetime | None = None) -> dict[str, Any]:
    """The reader's state as plain data (``{"enabled": False}`` when it is off)."""
    if not settings.llm_enabled:
        return {"enabled": False}
    now = now or datetime.now(UTC)
    health = store.health(session, now.astimezone(UTC).date().isoformat())
    return {
        "enabled": True,
        "model": settings.llm_model,
        "base_url": settings.llm_base_url,
        "calls_today": health.calls_today,
        "daily_calls": settings.llm_daily_calls,
        "cache_hits_today": health.cache_hits_today,
        "readings": health.readings,
        "refused": health.refused,
        "last_success": health.last_success_at.isoformat() if health.last_success_at else None,
        "last_failure": health.last_failure_at.isoformat() if health.last_failure_at else None,
        "last_failure_reason": health.last_failure,
    }
