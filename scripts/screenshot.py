"""Screenshot the digest email with headless Chromium (the README's picture).

    .venv/bin/python -m scripts.screenshot             # docs/digest-<week>.png (600 wide)
                                                        # and docs/digest-<week>-mobile.png (375)
    .venv/bin/python -m scripts.screenshot --week 2026-W39 --out-dir /tmp

It polls the bundled example feed into a scratch SQLite file, renders the
latest complete week (or --week) exactly as it would be emailed, and shoots
the whole page: a first Chromium run measures the page height at that width,
a second one takes the picture. tests/test_browser.py reuses these functions.
"""

from __future__ import annotations

import argparse
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

from bot import ingest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
    "--force-device-scale-factor=1", "--mute-audio",
)
# Headless Chromium lays out --dump-dom pages at least 500px wide, so the probe
# pins the page width itself before measuring.
_PIN_WIDTH = "<style>html {{ width: {width}px; }}</style></head>"
_MEASURE = ("<script>var right = 0; document.querySelectorAll('body *').forEach(function (e) {"
            "right = Math.max(right, e.getBoundingClientRect().right); });"
            "document.body.setAttribute('data-page-size', Math.ceil(right) + 'x' + "
            "Math.ceil(document.documentElement.getBoundingClientRect().height))</script></body>")


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def _run(chromium: str, profile: Path, *args: str, timeout: float = 60) -> str:
    result = subprocess.run(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"chromium failed ({result.returncode}): {result.stderr[-2000:]}")
    return result.stdout


def page_size(chromium: str, html_path: Path, width: int, profile: Path) -> tuple[int, int]:
    """(content width, height) of the page laid out ``width`` wide, measured by
    a copy that reports them in the DOM (the email itself carries no script).
    A content width above ``width`` means something overflows sideways."""
    probe = profile / "measure.html"
    html = html_path.read_text(encoding="utf-8")
    html = html.replace("</head>", _PIN_WIDTH.format(width=width), 1).replace("</body>", _MEASURE, 1)
    probe.write_text(html, encoding="utf-8")
    dom = _run(chromium, profile, "--dump-dom", "--virtual-time-budget=3000",
               f"--window-size={width},1000", probe.as_uri())
    marker = 'data-page-size="'
    if marker not in dom:
        raise RuntimeError("could not measure the page")
    found = dom.split(marker, 1)[1].split('"', 1)[0]
    content_width, height = found.split("x")
    return int(content_width), int(height)


def screenshot(
    html_path: Path, png_path: Path, width: int, height: int | None = None,
    chromium: str | None = None,
) -> Path:
    """Shoot ``html_path`` at ``width``; the full page unless ``height`` is given."""
    chromium = chromium or find_chromium()
    if chromium is None:
        raise RuntimeError("chromium not found (apt-get install chromium fonts-noto-cjk)")
    png_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="digestbot-chromium-") as tmp:
        profile = Path(tmp)
        height = height or page_size(chromium, html_path.resolve(), width, profile)[1]
        _run(chromium, profile, f"--screenshot={png_path.resolve()}",
             f"--window-size={width},{height}", "--virtual-time-budget=3000",
             html_path.resolve().as_uri())
    return png_path


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    head = path.read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError(f"{path} is not a PNG")
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def render_example(workdir: Path, week: str | None = None) -> tuple[Path, str]:
    """Poll the bundled example feed into a scratch database and write the
    email HTML of ``week`` (default: the latest complete week). Returns the
    HTML file and the week's label."""
    from bot import db, digest, render
    from bot.config import load_settings

    url = f"sqlite:///{workdir / 'screenshot.sqlite3'}"
    settings = load_settings({"DIGESTBOT_DATABASE_URL": url})
    engine = db.make_engine(url)
    try:
        db.upgrade(engine)
        factory = db.session_factory(engine)
        ingest.poll_feeds(settings, factory)
        with factory() as session:
            chosen = (digest.parse_week(week, settings.timezone) if week
                      else digest.latest_complete_week(session, settings))
            if chosen is None:
                raise RuntimeError("the example feed has no complete week")
            data = digest.build_digest(session, chosen, settings)
    finally:
        engine.dispose()
    html_path = workdir / f"digest-{chosen.label}.html"
    html_path.write_text(render.render_digest(data, settings).html, encoding="utf-8")
    return html_path, chosen.label


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--week", help="ISO week, e.g. 2026-W40 (default: latest complete)")
    parser.add_argument("--out-dir", type=Path, default=DOCS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="digestbot-shot-") as tmp:
        html_path, label = render_example(Path(tmp), args.week)
        for width, suffix in ((600, ""), (375, "-mobile")):
            png = screenshot(html_path, args.out_dir / f"digest-{label}{suffix}.png", width)
            print(f"{png} {png_size(png)[0]}x{png_size(png)[1]} {png.stat().st_size // 1024} KB")


if __name__ == "__main__":  # python -m scripts.screenshot, from the repository root
    main()
