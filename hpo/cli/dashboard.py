"""`hpo dashboard [STUDY_FILE | --storage URL]`: the live, read-only web dashboard of studies, trials and runs."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from urllib.parse import quote

import click

from dashboards.locate import Sources, open_api, store_beside
from dashboards.server import start_server
from hpo.cli.app import summary
from hpo.cli.options import set_option, storage_option
from hpo.errors import ConfigError
from hpo.spec import StudySpec, load_spec
from hpo.tracking.events import store_location


@click.command("dashboard", short_help=summary("dashboard"))
@click.argument("spec_file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@storage_option
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
@set_option
def dashboard(
    spec_file: Path | None,
    storage: str | None,
    store: str | None,
    host: str,
    port: int,
    overrides: tuple[str, ...],
) -> None:
    """Serve the live web dashboard.

    Serves the dashboard for SPEC_FILE (a study or run file) or --storage URL until Ctrl-C.

    \b
    Example:
      hpo dashboard studies/digits_mlp.yaml --port 8080"""
    sources = locate(spec_file, storage, store, overrides)
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
    return quote(text, safe="")


def locate(
    spec_file: Path | None, storage: str | None, store: str | None, overrides: tuple[str, ...]
) -> Sources:
    """What the dashboard (or report) reads: a study or run file's storage and store, or the URLs given."""
    if spec_file is None:
        if storage is None and store is None:
            raise ConfigError(
                "give a study file (hpo dashboard study.yaml) or --storage URL (or --store for runs)"
            )
        return Sources(storage, store or (store_beside(storage) if storage else None), None, None)
    if not spec_file.is_file():
        raise ConfigError(f"{spec_file}: no such study or run file")
    spec = load_spec(spec_file, overrides=list(overrides), storage=storage)  # a run file or a study file
    if isinstance(spec, StudySpec):
        metrics = list(spec.study.metrics or [])
        return Sources(spec.storage, store or store_location(spec), str(spec_file), spec.name, metrics)
    return Sources(storage, store or store_location(spec), None, None)
