"""The README and the manual (issue 35): a short README that links into the
manual, a manual whose pages are all in its nav, whose links resolve, which
builds with `mkdocs build --strict`, which names every module of the code and
every command.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).parent.parent
DOCS = ROOT / "docs"
sys.path.insert(0, str(ROOT / "scripts"))
import commands_doc  # noqa: E402 (scripts/ is not a package)

LINK = re.compile(r"\]\(([^)\s]+)\)")


def nav_pages() -> set[str]:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text.split("\nnav:", 1)[1]
    return set(re.findall(r":\s*([\w./-]+\.md)\s*$", nav, re.M))


def test_the_readme_is_short_and_links_into_the_manual():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    assert "make demo" in readme and "make test" in readme and "docs/digest-2026-W40.png" in readme
    for page in ("operating", "commands", "feeds", "themes", "desk", "deliverability", "security",
                 "postgres", "development"):
        assert f"](docs/{page}.md" in readme, page
    for target in LINK.findall(readme):
        if "://" in target:
            continue
        path = (ROOT / target.split("#", 1)[0])
        assert path.exists(), f"README links to {target}, which is not there"


def test_every_page_is_in_the_nav_and_every_link_resolves():
    pages = {p.name for p in DOCS.glob("*.md")}
    assert pages == nav_pages(), f"not in the nav: {pages - nav_pages()}; missing: {nav_pages() - pages}"
    for page in DOCS.glob("*.md"):
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("#"):
                continue
            path = target.split("#", 1)[0]
            assert not path.startswith(("../", "/")), f"{page.name}: {target} leaves the site"
            assert (DOCS / path).exists(), f"{page.name} links to {target}, which is not there"


def test_what_the_old_readme_said_is_still_in_the_manual():
    text = "\n".join(p.read_text(encoding="utf-8") for p in DOCS.glob("*.md"))
    for heading in ("Settings", "How polling behaves", "Managing feeds", "Grouping into themes",
                    "How well it works", "The email", "Previewing a digest", "Subscribing and confirming",
                    "Unsubscribing", "Managing subscribers", "Sending", "Transports",
                    "What a crash can do: the delivery ledger", "Secret key", "Setting the admin password",
                    "Approval mode", "How the code is laid out", "Run without Docker",
                    "Deploy with docker-compose"):
        assert re.search(rf"^#+ {re.escape(heading)}$", text, re.M), heading
    # the sentence encoder is gone (issue 33): no page but the research record still describes its cost
    current = "\n".join(p.read_text(encoding="utf-8") for p in DOCS.glob("*.md") if p.name != "grouping-quality.md")
    assert "about 50 s" not in current + (ROOT / "README.md").read_text(encoding="utf-8")
    assert "DIGESTBOT_EMBED_ENTRIES" not in current


def test_the_layout_table_names_every_module():
    table = (DOCS / "development.md").read_text(encoding="utf-8").split("## How the code is laid out", 1)[1]
    missing = []
    for path in sorted((ROOT / "bot").rglob("*.py")):
        name = path.stem
        if name in ("__init__", "__main__"):
            continue
        if f"`{name}`" not in table and f"{name}.py" not in table:
            missing.append(str(path.relative_to(ROOT)))
    assert not missing, f"docs/development.md does not name: {missing}"


def test_the_commands_page_has_every_command_with_its_help():
    from bot.cli import cli

    reference = commands_doc.reference()
    commands = list(commands_doc.walk(cli, ("digestbot",)))
    assert len(commands) > 40
    for path, command in commands:
        assert f"`{' '.join(path)}`" in reference, path
        assert (command.help or "").strip(), f"{' '.join(path)} has no help text"
    for must in (("digestbot", "draft", "describe"), ("digestbot", "admin", "hash-password")):
        assert must in [p for p, _ in commands]
    assert isinstance(cli, click.Group)


def test_the_manual_builds_strictly(tmp_path):
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    if mkdocs is None:
        pytest.skip("mkdocs is not installed: pip install -e '.[docs]' (make docs does)")
    built = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
                           cwd=ROOT, capture_output=True, text=True, timeout=300,
                           env={"NO_MKDOCS_2_WARNING": "1", "PATH": str(Path(sys.executable).parent)})
    assert built.returncode == 0, built.stderr[-3000:]
    page = (tmp_path / "site" / "commands" / "index.html").read_text(encoding="utf-8")
    assert "digestbot draft describe" in page and "digestbot feeds add" in page
