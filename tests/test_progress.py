"""Long steps say how far they got when the output is a log (issue 35, item 12).

Seen: with `make demo | tee log`, the embedding step printed nothing for
minutes (rich draws its bar only on a terminal). ``bot.terminal.StepProgress``
prints a line every 10 s or every 10 % off a terminal. The clock is given,
so no test waits or depends on the machine's speed.
"""

from __future__ import annotations

import io

from click.testing import CliRunner
from rich.console import Console
from smtp import add_subscribers
from test_digest import poll_fixture

from bot.cli import cli
from bot.terminal import StepProgress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def log_console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=False, width=200), out


def test_off_a_terminal_a_line_at_the_start_and_every_tenth():
    console, out = log_console()
    progress = StepProgress("embedding entries", console, clock=Clock())
    for done in range(1, 101):
        progress.update(done, 100)
    progress.stop()
    lines = out.getvalue().splitlines()
    assert lines == ["embedding entries: 1/100 (1%)"] + [
        f"embedding entries: {n}/100 ({n}%)" for n in range(10, 101, 10)]


def test_off_a_terminal_a_line_every_ten_seconds_of_slow_work():
    console, out = log_console()
    clock = Clock()
    progress = StepProgress("sending", console, clock=clock)
    for done in range(1, 31):  # one unit a second: 3 % of the work in 30 s
        clock.now += 1.0
        progress.update(done, 1000)
    progress.stop()  # the step ends early: its last count is said
    assert out.getvalue().splitlines() == [
        "sending: 1/1000 (0%)", "sending: 11/1000 (1%)", "sending: 21/1000 (2%)",
        "sending: 30/1000 (3%)"]


def test_nothing_to_do_prints_nothing():
    console, out = log_console()
    StepProgress("embedding entries", console, clock=Clock()).stop()
    assert out.getvalue() == ""


def test_on_a_terminal_it_is_a_bar_not_lines():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    progress = StepProgress("sending", console, clock=Clock())
    for done in range(1, 11):
        progress.update(done, 10)
    progress.stop()
    assert "sending: 1/10" not in out.getvalue() and "10/10" in out.getvalue()


def test_send_into_a_log_reports_its_progress(fresh_db, make_settings, tmp_path):
    settings = make_settings()
    poll_fixture(settings, fresh_db.factory)
    add_subscribers(fresh_db.factory, [f"r{n}@example.org" for n in range(20)])
    env = {"DIGESTBOT_DATABASE_URL": fresh_db.url, "DIGESTBOT_OUTBOX_DIR": str(tmp_path / "out")}
    result = CliRunner().invoke(cli, ["send", "--week", "2026-W40"], env=env)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("sending: ")]
    assert lines[0] == "sending: 0/20 (0%)" and lines[-1] == "sending: 20/20 (100%)"
    assert len(lines) <= 12  # a line per tenth (and per 10 s), not one per message
