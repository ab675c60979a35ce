"""`digestbot run`, `web` and `status`: the long-running service and its report."""

from __future__ import annotations

import json

import click

from bot import logs
from bot.cli.app import App, console, listen_options, pass_app, reports_errors
from bot.cli.output import chosen_format, emit_rows, flatten, format_option


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
@format_option
@pass_app
@reports_errors
def status_command(app: App, fmt: str | None) -> None:
    """Show feeds, the next scheduled send, the last digest and subscriber counts.

    Times are in DIGESTBOT_TIMEZONE. tsv and csv (tsv is the default into a
    pipe) give one `key<TAB>value` line per fact, e.g. `feeds.1.health  ok`."""
    from bot import status

    fmt = chosen_format(fmt)
    data = status.gather(app.settings, app.engine, app.factory)
    if fmt == "json":
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
    elif fmt == "table":
        status.render(data, console)
    else:
        emit_rows(fmt, [("key", "key"), ("value", "value")], flatten(data), tz=app.settings.tz)


@click.command("web")
@listen_options
@pass_app
@reports_errors
def web_command(app: App, host: str | None, port: int | None) -> None:
    """Serve the subscribe/confirm/unsubscribe pages and the archive (no scheduler)."""
    import uvicorn

    from bot import service, web

    settings = app.settings
    application = web.create_app(settings, app.factory)
    host, port = host or settings.host, port or settings.port
    sock = service.listening_socket(host, port)
    console.print(f"serving on http://{host}:{port} (public address {settings.base_url})",
                  markup=False)
    # the one logging set-up (bot.logs), as for `run`: uvicorn's own lines at DEBUG only
    logs.configure(settings.log_level)
    config = uvicorn.Config(application, host=host, port=port, log_config=None,
                            access_log=settings.log_level.upper() == "DEBUG",
                            # X-Forwarded-For is read by the app, from DIGESTBOT_TRUSTED_PROXIES only
                            proxy_headers=False, server_header=False)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
