"""`digestbot preview` and `digestbot send`: a week's digest, shown or mailed."""

from __future__ import annotations

import json
import sys
import webbrowser
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from bot.cli.app import App, LazyBar, LazyModule, console, err_console, pass_app, reports_errors, write_out
from bot.terminal import printable

if TYPE_CHECKING:
    from bot import digest, render, send
    from bot.themes import explain
else:  # the renderer, the grouping and the send load when a command runs, not for --help
    digest, render, send = (LazyModule(f"bot.{name}") for name in ("digest", "render", "send"))
    explain = LazyModule("bot.themes.explain")


@click.command()
@click.option("--week", "week_text", metavar="YYYY-Www",
              help="ISO week such as 2026-W40 (default: the latest complete week with entries).")
@click.option("--format", "fmt", type=click.Choice(["html", "text", "json"]), default="html",
              show_default=True, help="The email's HTML or text part, or the digest as JSON.")
@click.option("--out", type=click.Path(dir_okay=False),
              help="Write here (default: HTML to <var>/preview-<week>.html, text and JSON to stdout).")
@click.option("--open", "open_it", is_flag=True, help="Open the HTML in a web browser.")
@click.option("--explain", is_flag=True,
              help="Say why each entry is in its section: matched terms and scores (text or json).")
@pass_app
@reports_errors
def preview(app: App, week_text: str | None, fmt: str, out: str | None, open_it: bool,
            explain: bool = False) -> None:
    """Render a week's digest as it would be emailed, without sending anything."""
    if open_it and fmt != "html":
        raise click.UsageError("--open needs --format html")
    if explain and fmt == "html":
        raise click.UsageError("--explain needs --format text or --format json")
    settings = app.settings
    with app.factory() as session:
        week = (digest.parse_week(week_text, settings.timezone) if week_text
                else digest.latest_complete_week(session, settings))
        if week is None:
            err_console.print("no complete week with entries yet: run `digestbot poll` first")
            return
        data = digest.build_digest(session, week, settings)
    if data.is_empty and not settings.send_empty:
        err_console.print(f"{week.label} has no entries, so no digest would be sent "
                          "(set DIGESTBOT_SEND_EMPTY=true to send one anyway)", markup=False)
        return
    if fmt == "json":
        doc = render.digest_json(data)
        if explain:
            _explain_json(doc, data)
        body = json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
    else:
        rendered = render.render_digest(data, settings)
        # no reader, so no reader's own unsubscribe link: a marked sample, never the placeholder
        body = render.with_sample_links(rendered.html if fmt == "html" else rendered.text,
                                        settings.base_url)
        if explain:
            body += _explain_text(data)
    if out is None and fmt != "html":
        click.echo(body, nl=False)
        return
    path = Path(out) if out else settings.var_dir / f"preview-{week.label}.html"
    write_out(path, body, parents=True)
    console.print(f"preview of {week.label} ({fmt}) written to {path}", markup=False)
    if open_it and not _open_in_browser(path):
        err_console.print(f"no web browser found to open it: open {path.resolve()} yourself "
                          "(or set BROWSER to the command of one)", markup=False, highlight=False)


def _explain_json(doc: dict[str, Any], data: digest.DigestData) -> None:
    """Add each entry's "why" (bot.themes.explain) to the JSON of the digest."""
    for theme_doc, theme in zip(doc["themes"], data.themes, strict=True):
        for entry_doc, entry in zip(theme_doc["entries"], theme.entries, strict=True):
            entry_doc["why"] = explain.explanation_json(entry.why) if entry.why else None
            entry_doc["llm"] = entry.llm or None  # the language model's choice and reason (bot.llm)


def _explain_text(data: digest.DigestData) -> str:
    """Per section and entry, why the grouping put it there."""
    lines = ["", "=" * 60, "Why each entry is where it is (--explain)", ""]
    for theme in data.themes:
        kind = "catch-all" if theme.catch_all else ("derived" if theme.derived else theme.key)
        lines.append(f"[{kind}] {theme.name or '(catch-all)'}")
        for entry in theme.entries:
            lines.append(f"  - {entry.title}")
            lines += explain.explanation_lines(entry.why) if entry.why else ["    (placed by the editor)"]
            if entry.llm:
                lines.append(f"    llm: {entry.llm}")
    return "\n".join(printable(line) for line in lines) + "\n"


def _open_in_browser(path: Path) -> bool:
    """Open the file in the user's browser; False when there is none (a server,
    a container): ``webbrowser.open`` only says so by its return value."""
    try:
        return bool(webbrowser.open(path.resolve().as_uri()))
    except webbrowser.Error:
        return False


@click.command("send")
@click.option("--week", metavar="YYYY-Www", help="ISO week (default: the latest complete week).")
@click.option("--dry-run", is_flag=True, help="Send nothing; say what would be sent to whom.")
@click.option("--to", "to", metavar="ADDRESS",
              help="Send one test copy ([TEST] subject) to ADDRESS only; nothing is recorded.")
@click.option("--resend", is_flag=True,
              help="Send an already sent week again, to every confirmed subscriber.")
@pass_app
@reports_errors
def send_command(app: App, week: str | None, dry_run: bool, to: str | None, resend: bool) -> None:
    """Freeze a week's digest and send it to every confirmed subscriber.

    Safe to run again at any time: an interrupted send resumes where it stopped
    and nobody gets a second copy (see README, "Subscribers and delivery")."""
    import signal
    import threading

    if to and resend:
        raise click.UsageError("--to sends a test copy; it cannot be combined with --resend")
    stop = threading.Event()
    bar = LazyBar("sending")

    def on_progress(report: Any) -> None:
        bar.update(report.done, report.total)

    def on_signal(signum: int, _frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        err_console.print("stopping after the message in flight (press Ctrl-C again to stop now)")

    handlers = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            handlers[sig] = signal.signal(sig, on_signal)
    try:
        report = send.send_digest(app.settings, app.factory, week, dry_run=dry_run, to=to,
                                      resend=resend, progress=on_progress, stop=stop)
    finally:
        bar.stop()
        for sig, old in handlers.items():
            signal.signal(sig, old)
    console.print(report.summary(), markup=False)
    if report.outcome in ("sent", "incomplete"):
        console.print(f"subject: {report.subject}\ntransport: {report.transport}", markup=False)
    for address, error in report.errors:
        err_console.print(f"  failed: {address}: {printable(error)}", markup=False, highlight=False)
    for other in report.other_unfinished:
        err_console.print(f"note: the send of {other} is unfinished; "
                          f"run `digestbot send --week {other}` to finish it", markup=False)
    # another send of the week holds the rest and finishes it: nothing is wrong here
    shared = bool(report.held_elsewhere) and not report.errors and not stop.is_set()
    if report.outcome == "incomplete" and not shared:
        sys.exit(130 if stop.is_set() else 1)
    if report.outcome == "stopped":  # before anything was frozen or sent
        sys.exit(130)
    if report.outcome == "awaiting-approval":
        sys.exit(1)
