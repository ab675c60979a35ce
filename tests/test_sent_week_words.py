"""What the console and `draft show` say of a week's send (issue 35, item 8).

Seen: the dashboard said "Week 2026-W47: its send has started" of a week
that was fully sent, and `draft show` said an old week is covered by next
Monday's send without saying that a later week with entries takes its place.
"""

from __future__ import annotations

from click.testing import CliRunner
from test_admin_security import log_in, password_hash, serve  # noqa: F401 (fixtures)
from test_digest import poll_fixture

from bot.cli import cli
from bot.send import send_digest


def test_the_dashboard_says_a_sent_week_was_sent(serve, password_hash, fresh_db):  # noqa: F811
    server = serve(admin_password_hash=password_hash)
    settings = server.app.state.site.settings
    poll_fixture(settings, fresh_db.factory)  # the bundled feed: its newest week is 2026-W40
    assert send_digest(settings, fresh_db.factory, "2026-W40").outcome == "sent"  # to nobody: a sent week all the same
    with server.client() as client:
        log_in(client)
        page = client.get("/admin").text
    assert "Week <strong>2026-W40</strong>" in page
    assert "its send has started" not in page
    assert '<span class="badge ok">sent</span>' in page


def test_draft_show_of_an_old_week_says_a_later_week_takes_its_place(fresh_db, tmp_path):
    env = {"DIGESTBOT_DATABASE_URL": fresh_db.url, "DIGESTBOT_OUTBOX_DIR": str(tmp_path / "o")}
    assert CliRunner().invoke(cli, ["poll"], env=env).exit_code == 0  # entries up to 2026-W40
    shown = CliRunner().invoke(cli, ["draft", "show", "--week", "2026-W40"], env=env)
    assert shown.exit_code == 0, shown.output
    first = shown.output.splitlines()[0]
    assert first.startswith("2026-W40 (2026-09-28 – 2026-10-04): not approved")
    assert "covers it only if no later week gets entries before then" in first
