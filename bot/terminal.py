"""Text from outside (feeds, servers, files, addresses) made safe for a terminal.

A feed title or an HTTP reason phrase is data, not instructions: printed as
it is, ``[/]`` makes rich raise MarkupError, ``[link=...]`` adds a hyperlink,
and an escape sequence (ESC, or a C1 control such as CSI) can move the
cursor, retitle the window or hide text. Everything from outside goes through
``printable`` before it reaches a terminal, and through ``markup`` when it is
placed inside a rich markup string.

``StepProgress`` is how every long step shows how far it got: a bar on a
terminal, a line every 10 s or 10 % in a log.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from rich.markup import escape

# C0 and C1 controls, DEL, and the Unicode controls that reorder or hide text
# (bidirectional overrides and isolates, line/paragraph separators)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
_NEWLINES = re.compile(r"[\t\n]")


def printable(text: object, keep_newlines: bool = False) -> str:
    """``text`` without control characters: tabs (and newlines, unless
    ``keep_newlines``) become spaces, every other control is dropped."""
    value = "" if text is None else str(text)
    value = value.replace("\t", " ") if keep_newlines else _NEWLINES.sub(" ", value)
    return _CONTROLS.sub("", value)


def markup(text: object, keep_newlines: bool = False) -> str:
    """``printable(text)`` escaped for a rich markup string: shown as written."""
    return escape(printable(text, keep_newlines))


class StepProgress:
    """How far a long step has got, on any output.

    On a terminal it is a rich progress bar that appears with the first
    report (work that turns out to have nothing to do draws nothing). Off a
    terminal (``make demo | tee log``, systemd, cron) a bar draws nothing, so
    it prints a plain line instead, ``embedding entries: 30/77 (38%)``, at
    most once every ``every_seconds`` and at every ``every_fraction`` of the
    way, and the last one when the step ends. ``clock`` is for tests.
    """

    def __init__(self, description: str, console: Any, *, transient: bool = False,
                 every_seconds: float = 10.0, every_fraction: float = 0.1,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.description = description
        self._console = console
        self._transient = transient
        self._every_seconds, self._every_fraction = every_seconds, every_fraction
        self._clock = clock
        self._bar: Any = None
        self._task: Any = None
        self._said: tuple[int, int] | None = None  # the last (done, total) printed off a terminal
        self._said_at = 0.0
        self._last: tuple[int, int] | None = None  # the last report
        self._started = False

    def update(self, done: int, total: int) -> None:
        """``done`` of ``total`` units of work are done."""
        if self._console.is_terminal:
            self._draw(done, total)
        else:
            self._log(done, total)

    def stop(self) -> None:
        """The step ended (or failed): remove the bar, or print the last count."""
        if self._bar is not None:
            self._bar.stop()
        elif self._last is not None and self._said != self._last:
            self._line(*self._last)

    def _draw(self, done: int, total: int) -> None:
        if self._bar is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

            self._bar = Progress("[progress.description]{task.description}", BarColumn(),
                                 MofNCompleteColumn(), TimeRemainingColumn(), console=self._console,
                                 transient=self._transient)
            self._bar.start()
            self._task = self._bar.add_task(self.description, total=total)
        self._bar.update(self._task, total=total, completed=done)

    def _log(self, done: int, total: int) -> None:
        self._last = (done, total)
        now = self._clock()
        if not self._started:  # the first report: say that the step began
            self._started, self._said_at = True, now
            self._line(done, total)
            return
        step = max(1, int(total * self._every_fraction)) if total else 1
        crossed = self._said is None or done // step > self._said[0] // step or done >= total
        if crossed or now - self._said_at >= self._every_seconds:
            self._line(done, total)

    def _line(self, done: int, total: int) -> None:
        share = f" ({100 * done // total}%)" if total else ""
        self._console.print(f"{printable(self.description)}: {done}/{total}{share}",
                            markup=False, highlight=False)
        self._said, self._said_at = (done, total), self._clock()
