"""`digestbot run`, `web` and `status`: the long-running service and its report."""

from __future__ import annotations

import json

import click

from bot import logs
from bot.cli.app import App, console, listen_options, pass_app, reports_errors


@click.command("run")
@listen_options
@pass_app
@reports_errors
def run_command(app: App, host: str | None, port: int | None) -> None:
    """Run the web app and the scheduler (polls, weekly send) until SIGTERM or Ctrl-C."""
    from bot import service

    logs.configure(app.settings.log_level)
    service.run(app.settings, app.engine, app.factory, host=host, port=port)


@click.command("status")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True, help="Tables for people or JSON for scripts.")
@pass_app
@reports_errors
def status_command(app: App, fmt: str) -> None:
    """Show feeds, the next scheduled send, the last digest and subscriber counts."""
    from bot import status

    data = status.gather(app.settings, app.engine, app.factory)
    if fmt == "json":
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        status.render(data, console)


@click.command("web")
@listen_options
@pass_app
@reports_errors
def web_command(app: App, host: str | None, port: int | None) -> None:
    """Serve the subscribe/confirm/unsubscribe pages and the archive (no scheduler)."""
    import uvicorn

    from bot import web

    settings = app.settings
    application = web.create_app(settings, app.factory)
    host, port = host or settings.host, port or settings.port
    console.print(f"serving on http://{host}:{port} (public address {settings.base_url})",
                  markup=False)
    uvicorn.run(application, host=host, port=port, log_level=settings.log_level.lower(),
                proxy_headers=True, server_header=False)
