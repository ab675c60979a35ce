"""The admin console at ``/admin``: the operator's, apart from the public pages.

Its own routes (here), templates (``templates/admin/``), script and style
files (``static/``, served at ``/static/admin/``: no CDN, no build step,
nothing inline, so the pages work offline and under their strict CSP) and
tests (tests/test_admin_*.py). Every page is server-rendered and every
change is a plain POST form; ``static/admin.js`` only makes them quicker
(changes without a full reload, the email at two widths side by side).

Modules: ``auth`` (password, session cookie, CSRF, login rate limit, the
console's headers), ``base`` (the guard every route goes through, pages,
redirects), ``login``, ``overview`` (dashboard, archive), ``desk`` (this
week's draft), ``feeds`` (the feeds), ``people`` (subscribers). The console calls the same library
functions as the CLI (``bot.digest.draft``, ``bot.ingest.feeds``, ``bot.subscriptions``, ``bot.status``).
Its words come from the same message catalogues as the mail and the public
pages (``bot/locales``), in DIGESTBOT_LANGUAGE.
"""

from bot.web.admin import desk, feeds, login, overview, people
from bot.web.admin.auth import Admin

# the console's paths that take a bigger body than the app's 10 KB: a CSV file
# (read only for a logged-in session, and refused without its CSRF token)
LARGE_BODIES = {"/admin/subscribers/import": people.MAX_UPLOAD + 64 * 1024}

ROUTES = [*login.ROUTES, *overview.ROUTES, *desk.ROUTES, *feeds.ROUTES, *people.ROUTES]

__all__ = ["LARGE_BODIES", "ROUTES", "Admin"]
