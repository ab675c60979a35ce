"""feed management (issue 11): feeds in the database, paused, sources, backlog

- ``feeds``: the operator's ``name``, a ``status`` (active | paused | removed),
  the backlog cut-off and ``backfill`` choice of a feed added later, and the
  failure streak's start and alert time.
- ``entries``: ``link_key`` and ``fingerprint`` (the article behind an entry,
  by link and by title + summary) and ``backlog`` (held | backfill).
- ``entry_sources``: the other feeds that carry an entry.

Existing rows are brought along: feed URLs are normalised (unless two would
become one), every entry gets its link key and fingerprint, and entries that
are the same article as an earlier one and were never mailed are merged into
it (their feed becomes a source of the earlier entry). A downgrade drops the
new columns and table; merged entries are not split again.

Revision ID: 0002
Revises: 0001
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0002'
down_revision: str | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # plain ADD COLUMN, never a batch "move and copy": on SQLite, copying and
    # dropping ``feeds`` with foreign keys on would cascade-delete every entry
    op.add_column('feeds', sa.Column('name', sa.String(length=200), nullable=True))
    op.add_column('feeds', sa.Column('status', sa.String(length=20), server_default='active',
                                     nullable=False))
    op.add_column('feeds', sa.Column('backlog_before', sa.DateTime(timezone=True), nullable=True))
    op.add_column('feeds', sa.Column('backfill', sa.Boolean(), server_default=sa.false(),
                                     nullable=False))
    op.add_column('feeds', sa.Column('failing_since', sa.DateTime(timezone=True), nullable=True))
    op.add_column('feeds', sa.Column('alerted_at', sa.DateTime(timezone=True), nullable=True))
    op.create_index(op.f('ix_feeds_status'), 'feeds', ['status'], unique=False)

    op.add_column('entries', sa.Column('link_key', sa.String(length=1000), nullable=True))
    op.add_column('entries', sa.Column('fingerprint', sa.String(length=64), nullable=True))
    op.add_column('entries', sa.Column('backlog', sa.String(length=10), nullable=True))
    op.create_index(op.f('ix_entries_link_key'), 'entries', ['link_key'], unique=False)
    op.create_index(op.f('ix_entries_fingerprint'), 'entries', ['fingerprint'], unique=False)

    op.create_table('entry_sources',
    sa.Column('feed_id', sa.Integer(), nullable=False),
    sa.Column('key', sa.String(length=512), nullable=False),
    sa.Column('entry_id', sa.Integer(), nullable=False),
    sa.Column('first_seen_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['entry_id'], ['entries.id'],
                            name=op.f('fk_entry_sources_entry_id_entries'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['feed_id'], ['feeds.id'],
                            name=op.f('fk_entry_sources_feed_id_feeds'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('feed_id', 'key', name=op.f('pk_entry_sources'))
    )
    op.create_index(op.f('ix_entry_sources_entry_id'), 'entry_sources', ['entry_id'], unique=False)

    _bring_rows_along(op.get_bind())


def downgrade() -> None:
    op.drop_index(op.f('ix_entry_sources_entry_id'), table_name='entry_sources')
    op.drop_table('entry_sources')
    op.drop_index(op.f('ix_entries_fingerprint'), table_name='entries')
    op.drop_index(op.f('ix_entries_link_key'), table_name='entries')
    for column in ('backlog', 'fingerprint', 'link_key'):
        op.drop_column('entries', column)  # SQLite 3.35+: a plain DROP COLUMN, no table copy
    op.drop_index(op.f('ix_feeds_status'), table_name='feeds')
    for column in ('alerted_at', 'failing_since', 'backfill', 'backlog_before', 'status', 'name'):
        op.drop_column('feeds', column)


# --- existing rows ----------------------------------------------------------------

def _bring_rows_along(conn: sa.Connection) -> None:
    from datetime import UTC, datetime

    from bot.ingest.urls import article_key, fingerprint, normalise_feed_url

    meta = sa.MetaData()
    feeds = sa.Table('feeds', meta, autoload_with=conn)
    entries = sa.Table('entries', meta, autoload_with=conn)
    digest_entries = sa.Table('digest_entries', meta, autoload_with=conn)
    sources = sa.Table('entry_sources', meta, autoload_with=conn)

    taken = {url for (url,) in conn.execute(sa.select(feeds.c.url))}
    for feed_id, url, failures, error_at in conn.execute(
            sa.select(feeds.c.id, feeds.c.url, feeds.c.consecutive_failures,
                      feeds.c.last_error_at)).all():
        values = {}
        normal = normalise_feed_url(url)
        if normal != url and normal not in taken:
            taken.add(normal)
            values['url'] = normal
        if failures:
            values['failing_since'] = error_at
        if values:
            conn.execute(sa.update(feeds).where(feeds.c.id == feed_id).values(**values))

    rows = conn.execute(sa.select(entries.c.id, entries.c.feed_id, entries.c.key, entries.c.link,
                                  entries.c.title, entries.c.summary_text)
                        .order_by(entries.c.id)).all()
    idents: dict[int, list[tuple[str, str]]] = {}
    for entry_id, _feed, _key, link, title, summary in rows:
        link_key, print_ = article_key(link), fingerprint(title, summary or '')
        if link_key or print_:
            conn.execute(sa.update(entries).where(entries.c.id == entry_id)
                         .values(link_key=link_key, fingerprint=print_))
        idents[entry_id] = [(kind, value) for kind, value in (('l', link_key), ('f', print_))
                            if value]

    # merge: an entry already mailed keeps its place; of the rest, the earliest wins
    mailed = set(conn.execute(sa.select(digest_entries.c.entry_id)).scalars())
    keeper: dict[tuple[str, str], int] = {}
    now = datetime.now(UTC).replace(tzinfo=None) if conn.dialect.name == 'sqlite' \
        else datetime.now(UTC)
    for entry_id, feed_id, key, *_ in sorted(rows, key=lambda r: (r[0] not in mailed, r[0])):
        found = next((keeper[i] for i in idents[entry_id] if i in keeper), None)
        if found is None or entry_id in mailed:
            for ident in idents[entry_id]:
                keeper.setdefault(ident, entry_id)
            continue
        conn.execute(sa.insert(sources).values(feed_id=feed_id, key=key, entry_id=found,
                                               first_seen_at=now))
        conn.execute(sa.delete(entries).where(entries.c.id == entry_id))
