"""Subscribers' optional names (issue 35): a CSV import's `name` column is kept
(it was dropped), the export writes it, and an export reads back as an
import. Real SQLite (Alembic); the CLI through click's runner.
"""

from __future__ import annotations

import csv
import io

from click.testing import CliRunner
from conftest import FEED_FIXTURE
from sqlalchemy import select

from bot import subscribers, subscriptions
from bot.cli import cli
from bot.models import Subscriber


def env_of(fresh_db, tmp_path) -> dict[str, str]:
    return {"DIGESTBOT_DATABASE_URL": fresh_db.url, "DIGESTBOT_FEED_URLS": str(FEED_FIXTURE),
            "DIGESTBOT_OUTBOX_DIR": str(tmp_path / "outbox"),
            "DIGESTBOT_SECRET_KEY": "test-secret-key-not-for-production",
            "DIGESTBOT_BASE_URL": "https://digest.example.org", "DIGESTBOT_CONFIG": ""}


def names(fresh_db) -> dict[str, str | None]:
    with fresh_db.factory() as session:
        return {s.email: s.name for s in session.scalars(select(Subscriber))}


def test_read_csv_takes_the_name_column_of_a_header():
    rows = list(subscriptions.read_csv("Name,Email\n  Ann   Lee ,ann@example.com\n,bob@example.com\n"
                                       "Cy,ann@example.com\n"))
    assert [(r.address, r.name) for r in rows] == [
        ("ann@example.com", "Ann Lee"), ("bob@example.com", None), ("ann@example.com", None)]
    assert rows[2].duplicate_of == 2
    assert [r.name for r in subscriptions.read_csv("a@example.com,Ann\n")] == [None]  # no header: no names


def test_the_cli_import_keeps_names_and_the_export_writes_them(fresh_db, tmp_path):
    env = env_of(fresh_db, tmp_path)
    path = tmp_path / "list.csv"
    path.write_text("email,name\nann@example.org,Ann Lee\nbo@example.org,\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["subscribers", "import", str(path), "--confirmed"], env=env)
    assert result.exit_code == 0, result.output
    assert "2 line(s) read: 2 address(es) (2 added), 0 repeated line(s) skipped, 0 rejected" \
        in result.output
    assert names(fresh_db) == {"ann@example.org": "Ann Lee", "bo@example.org": None}

    out = CliRunner().invoke(cli, ["subscribers", "export"], env=env)
    rows = list(csv.DictReader(io.StringIO(out.output)))
    assert {r["email"]: r["name"] for r in rows} == {"ann@example.org": "Ann Lee", "bo@example.org": ""}

    # an export imported again (into another database, say) brings the names along
    again = list(subscriptions.read_csv(out.output))
    assert [(r.address, r.name) for r in again] == [("ann@example.org", "Ann Lee"), ("bo@example.org", None)]


def test_an_import_names_someone_already_there_and_a_name_never_blocks_an_address(fresh_db):
    subscriptions.subscribe(fresh_db.factory, "ann@example.org", confirmed=True)
    report = subscriptions.import_csv(
        fresh_db.factory, "email,name\nann@example.org,Ann\ncy@example.org," + "C" * 300 + "\n",
        confirmed=True, send_confirmation=lambda sub: None)
    assert [line.verdict for line in report.lines] == ["already", "added"]
    found = names(fresh_db)
    assert found["ann@example.org"] == "Ann" and found["cy@example.org"] == "C" * 200


def test_an_import_without_confirmed_mails_each_pending_address(fresh_db):
    mailed: list[str] = []
    report = subscriptions.import_csv(fresh_db.factory, "email\na@example.org\nA@example.org\nnope\n",
                                      confirmed=False, send_confirmation=lambda sub: mailed.append(sub.email))
    assert mailed == ["a@example.org"]
    assert [(line.verdict, line.line) for line in report.lines] == [
        ("pending", 2), ("repeated", 3), ("rejected", 4)]
    assert report.imported == 1
    with fresh_db.factory() as session:
        assert [s.status for s in subscribers.iter_subscribers(session)] == ["pending"]
