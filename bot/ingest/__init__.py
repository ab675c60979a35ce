"""The ingest stage: feeds in, entries stored.

- ``fetch``: a URL or local path to bytes (httpx: timeouts, size cap, conditional GET)
- ``parse``: bytes to plain, sanitised entries (feedparser, nh3)
- ``papers``: the paper names a write-up's title covers
- ``urls``: one spelling per feed address; the article behind a link or a text
- ``queries``: the feeds and entries tables, read and written only here
  (one article, one entry: a second feed only adds a source)
- ``feeds``: add, remove, pause, resume; the feeds of the settings; a new feed's backlog
- ``opml``: the list of feeds in and out as OPML (defusedxml)
- ``alerts``: the admin hears once when a feed breaks and once when it recovers
- ``poll``: one poll of every active feed, joining the above
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.ingest.poll import PollResult, fetch_options, poll_feed, poll_feeds

__all__ = ["PollResult", "fetch_options", "poll_feed", "poll_feeds"]


def __getattr__(name: str) -> Any:
    """``bot.ingest.poll_feeds`` and the rest, imported on first use: reading
    the feeds table (``bot.ingest.queries``) needs no HTTP client or parser."""
    if name in __all__:
        from bot.ingest import poll

        return getattr(poll, name)
    raise AttributeError(f"module 'bot.ingest' has no attribute {name!r}")
