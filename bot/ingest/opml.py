"""OPML: the list of feeds in and out, in the format every feed reader speaks.

Reading uses the standard library's XML parser through defusedxml, which
refuses entity definitions (the "billion laughs" bomb), external entities and
DTD tricks, and the file is refused before parsing when it is larger than
``MAX_OPML_BYTES``. Any ``<outline>`` with an ``xmlUrl`` is a feed, however
deeply nested in category outlines; its name is its ``title``, else its
``text``. Writing gives OPML 2.0.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET  # noqa: N817 (writing only: our own data)
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime
from pathlib import Path

import defusedxml.ElementTree as SafeET  # noqa: N812
from defusedxml import DefusedXmlException

from bot.errors import BotError
from bot.files import read_regular_file
from bot.ingest.urls import is_local

MAX_OPML_BYTES = 5_000_000  # a list of some ten thousand feeds


OPML_HINT = "export the list again from your feed reader, as OPML (.opml or .xml)"


class OpmlError(BotError):
    """An OPML file we will not read."""


@dataclass(frozen=True)
class OpmlFeed:
    url: str
    name: str | None
    category: str | None  # the enclosing outline's name, if any


def read_opml_file(path: str | Path) -> list[OpmlFeed]:
    """The feeds listed in an OPML file, checked for size before it is read."""
    data = read_regular_file(path, cap=MAX_OPML_BYTES, what="the OPML file", hint=OPML_HINT,
                             error=OpmlError)
    return read_opml(data, str(path))


def read_opml(data: bytes, where: str = "OPML") -> list[OpmlFeed]:
    """The feeds of an OPML document, in document order, each URL once."""
    if len(data) > MAX_OPML_BYTES:
        raise OpmlError(f"{where}: {len(data):,} bytes is too large for a list of feeds "
                        f"(at most {MAX_OPML_BYTES:,})", hint=OPML_HINT)
    try:
        root = SafeET.fromstring(data)
    except DefusedXmlException as exc:
        raise OpmlError(f"{where}: refused: the file declares entities or external "
                        f"references ({type(exc).__name__}), which an OPML file never needs",
                        hint="this is how XML bombs work; " + OPML_HINT) from None
    except ET.ParseError as exc:
        raise OpmlError(f"{where}: not well-formed XML ({exc})", hint=OPML_HINT) from None
    if _local(root.tag) != "opml":
        raise OpmlError(f"{where}: not an OPML file (its root element is <{_local(root.tag)}>)",
                        hint=OPML_HINT)
    body = next((child for child in root if _local(child.tag) == "body"), None)
    if body is None:
        raise OpmlError(f"{where}: the OPML file has no <body>", hint=OPML_HINT)
    found: dict[str, OpmlFeed] = {}
    for feed in _outlines(body, None):
        found.setdefault(feed.url, feed)
    return list(found.values())


def _outlines(parent: ET.Element, category: str | None) -> Iterator[OpmlFeed]:
    for child in parent:
        if _local(child.tag) != "outline":
            continue
        attrs = {_local(k).lower(): v.strip() for k, v in child.attrib.items()}
        name = attrs.get("title") or attrs.get("text") or None
        url = attrs.get("xmlurl")
        if url:
            yield OpmlFeed(url=url, name=name if name != url else None, category=category)
        yield from _outlines(child, name or category)


def _local(tag: str) -> str:
    """A tag or attribute name without its namespace."""
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


@dataclass(frozen=True)
class ExportFeed:
    url: str
    name: str
    site: str | None = None


def write_opml(feeds: Iterable[ExportFeed], title: str, now: datetime | None = None) -> bytes:
    """An OPML 2.0 document listing ``feeds``; local files as file:// URLs."""
    now = now or datetime.now(UTC)
    root = ET.Element("opml", version="2.0")
    head = ET.SubElement(root, "head")
    ET.SubElement(head, "title").text = title
    ET.SubElement(head, "dateCreated").text = format_datetime(now)
    ET.SubElement(head, "docs").text = "https://opml.org/spec2.opml"
    body = ET.SubElement(root, "body")
    for feed in feeds:
        url = Path(feed.url).as_uri() if is_local(feed.url) else feed.url
        attrs = {"type": "rss", "text": feed.name, "title": feed.name, "xmlUrl": url}
        if feed.site:
            attrs["htmlUrl"] = feed.site
        ET.SubElement(body, "outline", attrs)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"
