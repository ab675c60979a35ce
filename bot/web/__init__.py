"""The web app: subscribe, confirm, unsubscribe, the archive, a health check.

``create_app(settings, factory)`` builds a Starlette app; ``digestbot web``
serves it with uvicorn. ``DIGESTBOT_BASE_URL`` is its public address: links
in mails are built from it, and pages link relative to its path.

Modules: ``app`` (``create_app``: wiring, error pages), ``site`` (what the
handlers share, and the one way to answer with a page), ``public`` (the
subscriber's pages), ``archive``, ``health``, ``security`` (rate limits' values,
body limit, private headers), ``limits`` (rate-limit counters in the database,
shared by every instance). Pages are templates under ``templates/web/``, words
from the message catalogue (``bot.templating``). An admin console belongs in
its own package ``bot/web/admin/`` with its own routes, added in ``app``, so
the public pages and the admin stay apart.
"""

from bot.web.app import create_app
from bot.web.security import RateLimits

__all__ = ["RateLimits", "create_app"]
