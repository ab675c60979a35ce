"""Managing the feeds: add, remove, pause, resume, and the feeds of the settings.

Feeds live in the database. ``DIGESTBOT_FEED_URLS`` only adds: its URLs are
added when a command or the service starts (``sync_configured``), never
removed, and a feed the operator removed or paused stays that way.

A feed added after a digest went out has a *backlog*: the posts it had
published before it was added (``Feed.backlog_before`` marks the cut-off).
They are stored with ``backlog="held"``: searchable, counted, part of their
own week's digest if that week has not gone out yet, but never a late
addition (补录) to a later digest, so posts of weeks already mailed are never
mailed. With ``backfill`` they are marked ``"backfill"`` and go into the next
digest instead. A feed added before any digest went out has no backlog:
nobody has been mailed anything yet, so there is nothing to hold back.

Removing a feed keeps its row (status ``removed``) and the entries a digest
already holds, so the archive and the "never mailed twice" rule stay whole;
its other entries go, except those another feed also carries, which that
feed takes over.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

from sqlalchemy import delete, exists, select, update
from sqlalchemy.orm import Session, sessionmaker

from bot.config import Settings, example_feed_path
from bot.db import transaction
from bot.errors import BotError
from bot.ingest import queries
from bot.ingest.urls import is_local, normalise_feed_url
from bot.models import Digest, DigestEntry, Entry, EntrySource, Feed, FeedState

log = logging.getLogger(__name__)

LIST_HINT = "`digestbot feeds list` shows the feeds with their ids"


class FeedNotFoundError(BotError):
    """No feed by that URL or id."""


@dataclass(frozen=True)
class Added:
    """What ``add_feed`` did: ``outcome`` is added, exists or restored."""

    feed: Feed
    outcome: str


@dataclass(frozen=True)
class Removed:
    feed: Feed
    kept: int  # entries a digest holds: they stay, with their source
    handed_over: int  # entries another feed also carries: now that feed's
    deleted: int


def check_url(url: str, *, typed: bool = True) -> str:
    """The normalised address, or a BotError saying what is wrong with it.

    A local file path is accepted only when ``typed``: the operator wrote it
    (a CLI argument, DIGESTBOT_FEED_URLS). A path that comes from somewhere
    else (an OPML file's contents, the web console) is refused: whoever wrote
    that file must not make the bot read ``/etc/shadow`` and print what its
    parser made of it."""
    url = url.strip()
    if not url:
        raise BotError("no feed URL given", hint="give an http(s) URL or a file path")
    scheme = urlsplit(url).scheme.lower()
    if not typed and is_local(url):
        raise BotError(f"{url!r} is a local file path, refused here: a local feed is only "
                       "accepted where the operator types it",
                       hint="add a local feed file with `digestbot feeds add PATH` or "
                            "DIGESTBOT_FEED_URLS")
    if not is_local(url) and scheme not in ("http", "https"):
        raise BotError(f"{url!r} is neither an http(s) URL nor a file path",
                       hint="a feed is fetched over http(s) or read from a local file")
    if scheme in ("http", "https") and not urlsplit(url).hostname:
        raise BotError(f"{url!r} has no host name", hint="write the URL as https://host/path")
    return normalise_feed_url(url)


def any_digest(session: Session) -> bool:
    """Has any digest been frozen (its send started)? Then a new feed has a backlog."""
    return session.scalar(select(exists().where(Digest.id.is_not(None)))) or False


def add_feed(session: Session, url: str, now: datetime, *, name: str | None = None,
             backfill: bool = False, rename: bool = True, typed: bool = True) -> Added:
    """Add a feed, or restore a removed one; a feed already there is left as it is
    (apart from a new name, if one is given and ``rename``). ``typed``: the
    operator wrote ``url`` (see ``check_url``); False for an OPML file or a form."""
    normal = check_url(url, typed=typed)
    feed = session.scalar(select(Feed).where(Feed.url == normal))
    name = (name or "").strip()[:200] or None
    if feed is not None and feed.status != FeedState.REMOVED.value:
        if name and rename:
            feed.name = name
        return Added(feed, "exists")
    outcome = "restored" if feed is not None else "added"
    if feed is None:
        feed = Feed(url=normal, consecutive_failures=0)
        session.add(feed)
    feed.status = FeedState.ACTIVE.value
    feed.name = name or feed.name
    feed.backfill = backfill
    feed.backlog_before = now if any_digest(session) else None
    feed.failing_since = feed.alerted_at = None
    feed.consecutive_failures = 0
    session.flush()
    return Added(feed, outcome)


def find_feed(session: Session, ref: str) -> Feed:
    """A feed that is not removed, by its id (``3``) or its URL."""
    ref = ref.strip()
    feed = queries.feed_by_id(session, int(ref)) if ref.isdigit() else \
        session.scalar(select(Feed).where(Feed.url == normalise_feed_url(ref)))
    if feed is None or feed.status == FeedState.REMOVED.value:
        raise FeedNotFoundError(f"no feed {ref!r}", hint=LIST_HINT)
    return feed


def set_paused(session: Session, ref: str, paused: bool) -> tuple[Feed, bool]:
    """Pause or resume a feed; returns it and whether anything changed."""
    feed = find_feed(session, ref)
    wanted = FeedState.PAUSED.value if paused else FeedState.ACTIVE.value
    changed = feed.status != wanted
    feed.status = wanted
    if not paused and changed:  # a fresh start: old failures are no news
        feed.consecutive_failures = 0
        feed.failing_since = feed.alerted_at = None
    return feed, changed


def remove_feed(session: Session, ref: str) -> Removed:
    """Remove a feed (see the module docstring for what happens to its entries)."""
    feed = find_feed(session, ref)
    own = select(Entry.id).where(Entry.feed_id == feed.id)
    kept = set(session.scalars(own.where(Entry.id.in_(select(DigestEntry.entry_id)))))
    heirs: dict[int, tuple[int, str]] = {}
    for entry_id, feed_id, key in session.execute(
            select(EntrySource.entry_id, EntrySource.feed_id, EntrySource.key)
            .join(Feed, Feed.id == EntrySource.feed_id)
            .where(EntrySource.entry_id.in_(own), EntrySource.feed_id != feed.id,
                   Feed.status != FeedState.REMOVED.value)
            .order_by(EntrySource.first_seen_at, EntrySource.feed_id)):
        heirs.setdefault(entry_id, (feed_id, key))
    deleted = [entry_id for entry_id in session.scalars(own)
               if entry_id not in kept and entry_id not in heirs]
    handed = 0
    for entry_id, (feed_id, key) in heirs.items():
        if entry_id in kept:
            continue
        session.execute(delete(EntrySource).where(EntrySource.feed_id == feed_id,
                                                  EntrySource.key == key))
        session.execute(update(Entry).where(Entry.id == entry_id).values(feed_id=feed_id, key=key))
        handed += 1
    for start in range(0, len(deleted), 500):
        session.execute(delete(Entry).where(Entry.id.in_(deleted[start:start + 500])))
    session.execute(delete(EntrySource).where(EntrySource.feed_id == feed.id))
    feed.status = FeedState.REMOVED.value
    feed.etag = feed.last_modified = feed.body_hash = None  # a restored feed fetches afresh
    session.flush()
    return Removed(feed, kept=len(kept), handed_over=handed, deleted=len(deleted))


def sync_configured(session: Session, settings: Settings, now: datetime) -> list[Feed]:
    """Add the feeds of ``DIGESTBOT_FEED_URLS`` that are not in the database yet.

    Nothing is removed, and a feed the operator removed is not brought back
    (a log line says so). The bundled example feed, when it is only there as
    the default, is added to an empty database only: an operator who added
    their own feeds does not get it back at every start.
    """
    added = []
    for normal in _to_add(session, settings, warn=True):
        feed = session.scalar(select(Feed).where(Feed.url == normal))
        if feed is None:
            added.append(add_feed(session, normal, now).feed)
            log.info("feed added from DIGESTBOT_FEED_URLS: %s", normal)
        elif feed.status == FeedState.REMOVED.value:
            log.info("%s is in DIGESTBOT_FEED_URLS but was removed with `digestbot feeds "
                     "remove`; `digestbot feeds add` brings it back", normal)
    return added


def not_added_yet(session: Session, settings: Settings) -> list[str]:
    """The feeds of ``DIGESTBOT_FEED_URLS`` the next start will add (for `status`)."""
    return [url for url in _to_add(session, settings, warn=False)
            if session.scalar(select(Feed.id).where(Feed.url == url)) is None]


def _to_add(session: Session, settings: Settings, *, warn: bool) -> list[str]:
    """The normalised configured URLs, minus the bundled default once the
    database has feeds of its own."""
    urls = settings.feed_urls
    if urls == (example_feed_path(),) and session.scalar(select(exists().where(Feed.id > 0))):
        return []
    found = []
    for url in urls:
        try:
            found.append(check_url(url))
        except BotError as exc:
            if warn:
                log.warning("DIGESTBOT_FEED_URLS: %s", exc.message)
    return list(dict.fromkeys(found))


def add_configured(settings: Settings, factory: sessionmaker[Session]) -> list[str]:
    """``sync_configured`` in a transaction of its own (the service at start)."""
    with transaction(factory) as session:
        return [feed.url for feed in sync_configured(session, settings, datetime.now(UTC))]


def active_urls(factory: sessionmaker[Session]) -> list[str]:
    """The URLs of the feeds a poll fetches, in the order added."""
    with factory() as session:
        return [feed.url for feed in queries.active_feeds(session)]


def configured_urls(settings: Settings) -> set[str]:
    """The normalised addresses of ``DIGESTBOT_FEED_URLS``."""
    found = set()
    for url in settings.feed_urls:
        try:
            found.add(check_url(url))
        except BotError:
            continue
    return found


def polled_urls(session: Session, settings: Settings, urls: Sequence[str] | None,
                now: datetime) -> list[str]:
    """What a poll fetches: every active feed (after adding the configured ones),
    or the feeds named, which are added first if they are new."""
    if urls is None:
        sync_configured(session, settings, now)
        return [feed.url for feed in queries.active_feeds(session)]
    chosen = []
    for url in urls:
        if url.strip().isdigit():
            chosen.append(find_feed(session, url).url)
            continue
        normal = check_url(url)
        feed = session.scalar(select(Feed).where(Feed.url == normal))
        if feed is not None and feed.status == FeedState.REMOVED.value:
            raise BotError(f"{normal} was removed", hint=f"`digestbot feeds add {url}` brings it back")
        if feed is None:
            add_feed(session, normal, now)
            log.info("feed added by poll: %s", normal)
        chosen.append(normal)
    return list(dict.fromkeys(chosen))


def local_path_missing(url: str) -> bool:
    """A local feed file that is not there (worth a word when it is added)."""
    return is_local(url) and not Path(url).exists()
