"""`hpo dashboard [STUDY_FILE | --storage URL]`: the live, read-only web dashboard of studies, trials and runs."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import click

from hpo.errors import ConfigError


@click.command("dashboard", short_help="Serve the live web dashboard.")
@click.argument("spec_file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--storage", metavar="URL", help="Optuna storage URL to watch (instead of, or overriding, the file's)."
)
@click.option(
    "--store", metavar="PATH|URL", help="Experiment store (default: the one the study or run file uses)."
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind; 0.0.0.0 exposes it on the network.",
)
@click.option(
    "--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="Port (0: any free port)."
)
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a field of the file.")
def dashboard(
    spec_file: Path | None,
    storage: str | None,
    store: str | None,
    host: str,
    port: int,
    overrides: tuple[str, ...],
) -> None:
    """Serve the dashboard for SPEC_FILE (a study or run file) or --storage URL until Ctrl-C."""
    from dashboards.locate import locate, open_api

    sources = locate(spec_file, storage, store, overrides)  # usage errors first, before the heavy imports
    from dashboards.server import start_server

    api = open_api(sources)
    if api.source is not None:
        threading.Thread(target=api.source.warm_up, name="hpo-dashboard-warm-up", daemon=True).start()
    try:
        server = start_server(api, host, port)
    except OSError as error:
        raise ConfigError(f"cannot listen on {host}:{port}: {error.strerror}; pick another --port") from None
    start_page = server.url + ("/study?name=" + _quote(sources.study_name) if sources.study_name else "/")
    click.echo(f"hpo dashboard (read-only) at {start_page}")
    if sources.store:
        click.echo(f"experiment store: {sources.store}")
    click.echo("Ctrl-C to stop.", err=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.shutdown()


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")
