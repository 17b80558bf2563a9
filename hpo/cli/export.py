"""`hpo export study.yaml [--trial N] [--metric NAME] --out DIR` and `hpo export run.yaml --out DIR`.

For adapter (peft:) files: `--merge` writes a plain model with the adapter folded in; `--top K` writes the K best trials'
adapters as named adapters (trial-<n>) over one base model."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from hpo.cli.app import summary
from hpo.errors import ConfigError
from hpo.export.write import ExportResult, export_run, export_study, export_top
from hpo.spec import StudySpec, load_spec


@click.command("export", short_help=summary("export"))
@click.argument("spec_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Folder to write.")
@click.option(
    "--trial", "trial_number", type=int, default=None, help="Export this trial instead of the best one."
)
@click.option(
    "--metric", default=None, help="With several objectives: the one that picks from the Pareto front."
)
@click.option("--storage", metavar="URL", help="Optuna storage URL instead of the study file's.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a field of the file.")
@click.option("--no-eval", is_flag=True, help="Skip reloading and evaluating the exported model.")
@click.option(
    "--merge", is_flag=True, help="Adapter files: fold the adapter into the base weights (a plain model)."
)
@click.option(
    "--top",
    "top_k",
    type=click.IntRange(min=1),
    default=None,
    help="Adapter studies: the K best trials' adapters.",
)
def export(
    spec_file: Path,
    out_dir: str,
    trial_number: int | None,
    metric: str | None,
    storage: str | None,
    overrides: tuple[str, ...],
    no_eval: bool,
    merge: bool,
    top_k: int | None,
) -> None:
    """Export the best model of a study (or of an `hpo train` run) to OUT, reload it and evaluate it."""
    if not spec_file.is_file():
        raise ConfigError(f"{spec_file}: no such file")
    spec = load_spec(spec_file, overrides=list(overrides), storage=storage)
    if top_k is not None and (trial_number is not None or merge):
        raise ConfigError(
            "--top: exports several trials' adapters; it cannot be combined with --trial or --merge"
        )
    if isinstance(spec, StudySpec) and top_k is not None:
        result = export_top(spec, out_dir, top_k, metric=metric, evaluate=not no_eval)
    elif isinstance(spec, StudySpec):
        result = export_study(
            spec, out_dir, trial_number=trial_number, metric=metric, evaluate=not no_eval, merge=merge
        )
    else:
        for flag, value in (
            ("--trial", trial_number),
            ("--metric", metric),
            ("--storage", storage),
            ("--top", top_k),
        ):
            if value is not None:
                raise ConfigError(f"{flag}: {spec_file} is a run file; {flag} applies to study files only")
        result = export_run(spec, out_dir, evaluate=not no_eval, merge=merge)
    print_result(result)


def print_result(result: ExportResult) -> None:
    source = result.source
    what = (
        f"trial {source.trial_number} of study {source.study_name}" if source.kind == "trial" else "the run"
    )
    console = Console()
    if result.adapters:
        names = ", ".join(result.adapters)
        console.print(
            f"exported the adapters {names} of study {source.study_name} over one base model to {result.out_dir}"
        )
        for name, adapter_source in result.adapters.items():
            reloaded = result.reloaded_adapters.get(name, {})
            sub = ExportResult(result.out_dir, adapter_source, adapter_source.recorded_metrics, reloaded)
            _print_comparison(console, sub, f"{name}: reloaded from the export and evaluated on the eval set")
        return
    console.print(f"exported {what} from {source.checkpoint} (step {source.step}) to {result.out_dir}")
    _print_comparison(console, result, "reloaded from the export and evaluated on the eval set")


def _print_comparison(console: Console, result: ExportResult, title: str) -> None:
    rows = result.comparison()
    if not rows:
        return
    table = Table(title=title, title_justify="left")
    for column in ("metric", "recorded", "reloaded", "difference"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    for name, recorded, reloaded in rows:
        difference = reloaded - recorded if recorded is not None and reloaded is not None else None
        table.add_row(name, _number(recorded), _number(reloaded), _number(difference))
    console.print(table)


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"
