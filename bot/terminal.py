"""Text from outside (feeds, servers, files, addresses) made safe for a terminal.

A feed title or an HTTP reason phrase is data, not instructions: printed as
it is, ``[/]`` makes rich raise MarkupError, ``[link=...]`` adds a hyperlink,
and an escape sequence (ESC, or a C1 control such as CSI) can move the
cursor, retitle the window or hide text. Everything from outside goes through
``printable`` before it reaches a terminal, and through ``markup`` when it is
placed inside a rich markup string.
"""

from __future__ import annotations

import re

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
