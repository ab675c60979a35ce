"""Reading a file the operator names: a regular file, no bigger than a cap.

Every file digestbot reads on someone's word (the subscriber CSV, an OPML
list, the themes file, the TOML config, the DKIM key, the admin password
file, the editor's note) goes through ``read_regular_file``. A device
(``/dev/zero`` never ends), a named pipe with no writer (``open`` waits
forever), a directory or a file far larger than any real one is refused at
once with an error that says what was expected, instead of a process that
hangs or grows until the kernel kills it.

The file is opened without blocking and checked on the open descriptor, so
what is read is what was checked (no swap between a ``stat`` and the
``open``), and at most ``cap + 1`` bytes are read whatever its size claims.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import BinaryIO

from bot.errors import BotError

STDIN = "-"
KiB = 1024
MiB = 1024 * KiB

# caps per kind of file: far above any real one, far below what would hurt
CONFIG_CAP = 1 * MiB  # a TOML settings file is a few KB
THEMES_CAP = 4 * MiB  # the bundled themes file is some 20 KB
CSV_CAP = 100 * MiB  # some two million addresses
NOTE_CAP = 1 * MiB  # an editor's note in Markdown
MAIL_CAP = 50 * MiB  # one message in the bounce Maildir (a bounce returns at most the original)
KEY_CAP = 64 * KiB  # a PEM key, a password hash, a secret key: a few hundred bytes


def read_regular_file(path: str | Path, *, cap: int, what: str, hint: str | None = None,
                      error: type[BotError] = BotError, stdin: BinaryIO | None = None) -> bytes:
    """The bytes of the regular file ``path``, at most ``cap`` of them.

    ``what`` names the file in errors ("the subscriber CSV", "config file").
    ``-`` reads ``stdin`` (capped the same way) when the caller passes one,
    i.e. where the command documents it. Anything else that is not a regular
    file, or is larger than ``cap``, raises ``error`` with ``hint``.
    """
    if stdin is not None and str(path) == STDIN:
        return _capped(stdin, cap, f"{what} on standard input", hint, error)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise error(f"{what} {path} does not exist", hint=hint) from None
    except OSError as exc:
        raise error(f"{what} {path} cannot be read: {exc.strerror}", hint=hint) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise error(f"{what} {path} is not a regular file (it is {file_kind(info.st_mode)})",
                    hint=hint)
    with os.fdopen(fd, "rb") as fh:
        if info.st_size > cap:
            raise error(_too_large(f"{what} {path}", cap, info.st_size), hint=hint)
        try:
            return _capped(fh, cap, f"{what} {path}", hint, error)
        except OSError as exc:
            raise error(f"{what} {path} cannot be read: {exc.strerror}", hint=hint) from None


def read_regular_text(path: str | Path, *, cap: int, what: str, hint: str | None = None,
                      error: type[BotError] = BotError, stdin: BinaryIO | None = None) -> str:
    """``read_regular_file`` decoded as UTF-8 (a BOM is dropped); not UTF-8 is ``error``."""
    data = read_regular_file(path, cap=cap, what=what, hint=hint, error=error, stdin=stdin)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        name = "standard input" if stdin is not None and str(path) == STDIN else str(path)
        raise error(f"{what} {name} is not UTF-8 text (byte {exc.start})", hint=hint) from None


def stdin_bytes() -> BinaryIO:
    """The process's standard input as bytes, for ``read_regular_file(..., stdin=...)``."""
    return sys.stdin.buffer


def file_kind(mode: int) -> str:
    """What a file that is not a regular one is, in words ("a named pipe")."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a plain file"


def _capped(fh: BinaryIO, cap: int, name: str, hint: str | None, error: type[BotError]) -> bytes:
    data = fh.read(cap + 1)
    if len(data) > cap:
        raise error(_too_large(name, cap), hint=hint)
    return data


def _too_large(name: str, cap: int, size: int | None = None) -> str:
    found = f"{size:,} bytes" if size is not None else f"more than {cap:,} bytes"
    return f"{name} is too large: {found}, where such a file holds at most {cap:,}"
