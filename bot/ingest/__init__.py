"""The ingest stage: feeds in, entries stored.

- ``fetch``: a URL or local path to bytes (httpx: timeouts, size cap, conditional GET)
- ``parse``: bytes to plain, sanitised entries (feedparser, nh3)
- ``papers``: the paper names a write-up's title covers
- ``queries``: the feeds and entries tables, read and written only here
- ``poll``: one poll of every feed, joining the above
"""

from bot.ingest.poll import PollResult, fetch_options, poll_feed, poll_feeds

__all__ = ["PollResult", "fetch_options", "poll_feed", "poll_feeds"]
