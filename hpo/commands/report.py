"""`hpo report STUDY_FILE -o report.html`: one self-contained HTML file with the study's plots (opens offline)."""

from __future__ import annotations

from pathlib import Path

import click

from hpo.commands.study_args import study_arguments


@click.command("report")
@study_arguments
@click.option(
    "-o",
    "--out",
    "out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="HTML file to write.",
)
def report(study_file: Path, storage: str | None, overrides: tuple[str, ...], out: Path) -> None:
    """Write the study page of STUDY_FILE, with its data and Plotly inlined, to one HTML file."""
    from dashboards.api import DashboardApi
    from dashboards.locate import locate
    from dashboards.optuna_source import OptunaSource
    from dashboards.report import write_report
    from dashboards.store_reader import StoreReader

    sources = locate(study_file, storage, None, overrides)
    if sources.study_name is None:
        from hpo.errors import ConfigError

        raise ConfigError(
            f"{study_file}: a report needs a study file (with a `study:` section), not a run file"
        )
    api = DashboardApi(OptunaSource(sources.storage), StoreReader(sources.store), study_file=str(study_file))
    written = write_report(api, sources.study_name, out)
    click.echo(
        f"wrote {written} ({written.stat().st_size / 1e6:.1f} MB); open it in a browser, no network needed"
    )
