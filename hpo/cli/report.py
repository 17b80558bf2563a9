"""`hpo report STUDY_FILE -o report.html`: one self-contained HTML file with the study's plots (opens offline)."""

from __future__ import annotations

from pathlib import Path

import click

from dashboards.locate import open_api
from dashboards.report import write_report
from hpo.cli.app import summary
from hpo.cli.dashboard import locate
from hpo.cli.options import out_option, study_arguments
from hpo.errors import ConfigError


@click.command("report", short_help=summary("report"))
@study_arguments
@out_option("HTML file to write.", file=True)
def report(study_file: Path, storage: str | None, overrides: tuple[str, ...], output_dir: Path) -> None:
    """Write a self-contained HTML report.

    The study page of STUDY_FILE, with its data and Plotly inlined, in one HTML file that opens offline.

    \b
    Example:
      hpo report studies/digits_mlp.yaml --out report.html"""
    sources = locate(study_file, storage, None, overrides)
    if sources.study_name is None:
        raise ConfigError(
            f"{study_file}: a report needs a study file (with a `study:` section), not a run file"
        )
    written = write_report(open_api(sources), sources.study_name, output_dir)
    click.echo(
        f"wrote {written} ({written.stat().st_size / 1e6:.1f} MB); open it in a browser, no network needed"
    )
