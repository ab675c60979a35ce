"""Long steps that a stop request does not wait for.

SIGTERM sets the service's stop event; loops look at it between items (a
feed, a recipient, a batch). A single step that cannot look at it -- one
call into the sentence encoder (seconds on a busy machine), the grouping of
a week's entries -- runs through ``until_stopped``: in a daemon thread of its
own, so the caller returns as soon as the event is set. The step is then
abandoned: it finishes (or dies with the process) on its own, and what it
returns is dropped. Only steps whose work is kept by the caller afterwards
(they compute, the caller stores) may be run this way, so an abandoned one
leaves nothing half-written.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

LOOK_EVERY = 0.05  # seconds between two looks at the stop event while a step runs


class Stopped(Exception):
    """The stop event was set before the step finished; its result is dropped."""


def until_stopped(step: Callable[[], T], stop: threading.Event | None, *, name: str) -> T:
    """``step()``'s result, or ``Stopped`` as soon as ``stop`` is set.

    Without a stop event the step simply runs here. Its exceptions reach the
    caller as they are."""
    if stop is None:
        return step()
    if stop.is_set():
        raise Stopped
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            outcome["value"] = step()
        except BaseException as exc:  # handed to the caller, who decides
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name=name, daemon=True).start()
    while not done.wait(LOOK_EVERY):
        if stop.is_set():
            raise Stopped
    if "error" in outcome:
        raise outcome["error"]
    value: T = outcome["value"]
    return value
