"""The schema comes from Alembic, and the models agree with it, on SQLite and PostgreSQL."""

from __future__ import annotations

import sys

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from click.testing import CliRunner
from helpers import any_db
from sqlalchemy import inspect

from bot import db
from bot.cli import cli
from bot.errors import DatabaseError
from bot.models import Base

# as migrations/env.py compares: column types too, and not APScheduler's job store table
COMPARE = {"compare_type": True, "include_object": db.include_in_comparison}


@any_db
def test_migrations_from_nothing_give_the_models_schema(db_url):
    engine = db.make_engine(db_url)
    try:
        assert db.upgrade(engine) == (None, db.head_revision(engine))
        assert set(Base.metadata.tables) <= set(inspect(engine).get_table_names())
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts=COMPARE)
            assert compare_metadata(context, Base.metadata) == []
    finally:
        engine.dispose()


@any_db
def test_migrations_create_every_table(fresh_db):
    tables = set(inspect(fresh_db.engine).get_table_names())
    assert set(Base.metadata.tables) <= tables
    assert db.current_revision(fresh_db.engine) == db.head_revision(fresh_db.engine)


@any_db
def test_models_match_migrations(fresh_db):
    with fresh_db.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts=COMPARE)
        diff = compare_metadata(context, Base.metadata)
    assert diff == [], f"models and migrations differ: {diff}; run scripts/new_migration.py"


@any_db
def test_upgrade_is_idempotent(fresh_db):
    before, after = db.upgrade(fresh_db.engine)
    assert before == after == db.head_revision(fresh_db.engine)


@any_db
def test_empty_database_gives_a_clear_message(db_url):
    engine = db.make_engine(db_url)
    try:
        db.check_current(engine)
    except DatabaseError as exc:
        assert "no digestbot schema" in exc.message and "digestbot db upgrade" in str(exc.hint)
    else:
        raise AssertionError("an unmigrated database was accepted")
    finally:
        engine.dispose()


@any_db
def test_database_behind_its_migrations(fresh_db):
    with fresh_db.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = 'old0'")
    try:
        db.check_current(fresh_db.engine)
    except DatabaseError as exc:
        assert "at revision old0" in exc.message
    else:
        raise AssertionError("a database behind its migrations was accepted")


@any_db
def test_downgrade_then_upgrade_round_trip(fresh_db):
    from alembic import command

    command.downgrade(db.alembic_config(fresh_db.engine), "base")
    assert "entries" not in inspect(fresh_db.engine).get_table_names()
    db.upgrade(fresh_db.engine)
    assert "entries" in inspect(fresh_db.engine).get_table_names()


@pytest.mark.parametrize("url", ["postgresql+psycopg://bot@db.example.org/digest",
                                 "postgresql://bot@db.example.org/digest"])
def test_a_missing_postgres_driver_says_how_to_install_it(monkeypatch, tmp_path, url):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg now fails
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["db", "upgrade"], env={"DIGESTBOT_DATABASE_URL": url})
    assert result.exit_code == 1, result.output
    assert "database driver for postgresql+psycopg:// is not installed" in result.output
    assert "pip install 'digestbot[postgres]'" in result.output
    assert "Traceback" not in result.output


@any_db
def test_upgrading_a_database_with_data_keeps_every_row(db_url):
    """Every later migration runs over a database that has a sent digest with
    its entries and deliveries: none of those rows may be lost on the way
    (on SQLite a table rebuild with foreign keys on would cascade-delete them)."""
    engine = db.make_engine(db_url)
    try:
        db.upgrade(engine, "0001")
        with engine.begin() as conn:
            conn.exec_driver_sql(
                "INSERT INTO feeds (id, url, consecutive_failures, created_at) "
                "VALUES (1, 'https://example.org/feed.xml', 0, '2026-10-01 00:00:00+00:00')")
            conn.exec_driver_sql(
                "INSERT INTO entries (id, feed_id, key, link, title, summary_html, summary_text, "
                "papers, published_at, dated, first_seen_at, content_hash) VALUES "
                "(1, 1, 'k1', 'https://example.org/a', 'A', '', '', '[]', "
                "'2026-10-01 00:00:00+00:00', true, '2026-10-01 00:00:00+00:00', 'h1')")
            conn.exec_driver_sql(
                "INSERT INTO digests (id, week, status, subject, html, text, entry_count, "
                "paper_count, created_at) VALUES (1, '2026-W40', 'sent', 's', '<p>', 't', 1, 0, "
                "'2026-10-05 00:00:00+00:00')")
            conn.exec_driver_sql(
                "INSERT INTO digest_entries (digest_id, entry_id, late) VALUES (1, 1, false)")
            conn.exec_driver_sql(
                "INSERT INTO subscribers (id, email, email_key, status, token_nonce, "
                "hard_failures, created_at) VALUES (1, 'a@example.org', 'a@example.org', "
                "'confirmed', 'n', 0, '2026-10-01 00:00:00+00:00')")
            conn.exec_driver_sql(
                "INSERT INTO deliveries (id, digest_id, subscriber_id, status, attempts, "
                "message_id) VALUES (1, 1, 1, 'sent', 1, '<m@example.org>')")
        db.upgrade(engine)
        with engine.connect() as conn:
            counts = {table: conn.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar()
                      for table in ("feeds", "entries", "digests", "digest_entries",
                                    "subscribers", "deliveries")}
        assert counts == dict.fromkeys(counts, 1)
    finally:
        engine.dispose()


@any_db
def test_the_job_store_finds_its_table_and_creates_nothing(fresh_db):
    """Two `digestbot run` processes starting at once on a database where the service never
    ran both created the job store's table; on PostgreSQL one of them then exited with
    "duplicate key value violates unique constraint pg_type_typname_nsp_index". The
    migrations create it, so starting the store runs no DDL at all."""
    from apscheduler.schedulers.background import BackgroundScheduler
    from sqlalchemy import event

    from bot.jobstore import JOBS_TABLE, make_jobstore

    assert JOBS_TABLE in inspect(fresh_db.engine).get_table_names()
    store = make_jobstore(str(fresh_db.engine.url.render_as_string(hide_password=False)))
    statements: list[str] = []
    event.listen(store.engine, "before_cursor_execute",
                 lambda conn, cursor, statement, *args: statements.append(statement))
    scheduler = BackgroundScheduler(jobstores={"default": store})
    scheduler.start(paused=True)
    scheduler.shutdown()
    store.engine.dispose()
    assert not [s for s in statements if s.lstrip().upper().startswith(("CREATE", "ALTER", "DROP"))], statements
