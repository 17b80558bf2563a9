"""`hpo export study.yaml [--trial N] [--metric NAME] --out DIR` and `hpo export run.yaml --out DIR`.

For adapter (peft:) files: `--merge` writes a plain model with the adapter folded in; `--top K` writes the K best trials'
adapters as named adapters (trial-<n>) over one base model."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from hpo.cli.app import summary
from hpo.cli.options import (
    metric_option,
    out_option,
    repeat_command,
    set_option,
    storage_option,
    trial_option,
)
from hpo.errors import ConfigError, Interrupted
from hpo.export.write import ExportResult, export_run, export_study, export_top
from hpo.spec import Spec, StudySpec, load_spec
from hpo.spec.output_url import is_url, mirror_name, scratch_root
from hpo.storage import remote


@click.command("export", short_help=summary("export"))
@click.argument("spec_file", type=click.Path(dir_okay=False, path_type=Path))
@out_option("Folder to write (an earlier export there is replaced as a whole).")
@trial_option("Export")
@metric_option
@storage_option
@set_option
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
    output_dir: str,
    trial_number: int | None,
    metric: str | None,
    storage: str | None,
    overrides: tuple[str, ...],
    no_eval: bool,
    merge: bool,
    top_k: int | None,
) -> None:
    """Export the best model and check it reloads.

    Writes the best model of a study (or of an `hpo train` run) to the --out folder, reloads it from there and
    evaluates it beside the metric recorded in training.

    \b
    Example:
      hpo export studies/digits_mlp.yaml --out exports/digits"""
    if not spec_file.is_file():
        raise ConfigError(f"{spec_file}: no such file")
    spec = load_spec(spec_file, overrides=list(overrides), storage=storage)
    if top_k is not None and (trial_number is not None or merge):
        raise ConfigError(
            "--top: exports several trials' adapters; it cannot be combined with --trial or --merge"
        )
    remote.check_store(spec.output_dir, "study.output_dir" if isinstance(spec, StudySpec) else "output_dir")
    out_url = output_dir if is_url(output_dir) else None
    if out_url is not None:  # written here (a scratch folder), then uploaded, its manifest last
        remote.check_url(out_url, "--out")
        output_dir = str(scratch_root() / "exports" / mirror_name(out_url))
    manifest = Path(output_dir) / "export.json"
    before = manifest.stat().st_mtime_ns if manifest.is_file() else None
    try:
        result = _export(
            spec, spec_file, output_dir, trial_number, metric, storage, top_k, merge, not no_eval
        )
    except KeyboardInterrupt:
        written = manifest.is_file() and manifest.stat().st_mtime_ns != before
        if written:  # the folder was swapped in; the reload check was cut short
            saved = f"the export in {output_dir} is complete, only its reload check was cut short"
        else:
            earlier = f" (the earlier export in {output_dir} is unchanged)" if before is not None else ""
            saved = f"nothing was written{earlier}"
        raise Interrupted(f"stopped: {saved}; continue with: {repeat_command()}") from None
    print_result(result)
    if out_url is not None:
        sent = remote.upload_folder(output_dir, out_url)
        click.echo(
            f"uploaded the export to {out_url}: {sent.files} files, {sent.bytes} bytes in {sent.seconds:.1f} s"
        )


def _export(
    spec: Spec,
    spec_file: Path,
    output_dir: str,
    trial_number: int | None,
    metric: str | None,
    storage: str | None,
    top_k: int | None,
    merge: bool,
    evaluate: bool,
) -> ExportResult:
    no_eval = not evaluate
    if isinstance(spec, StudySpec) and top_k is not None:
        result = export_top(spec, output_dir, top_k, metric=metric, evaluate=not no_eval)
    elif isinstance(spec, StudySpec):
        result = export_study(
            spec, output_dir, trial_number=trial_number, metric=metric, evaluate=not no_eval, merge=merge
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
        result = export_run(spec, output_dir, evaluate=not no_eval, merge=merge)
    return result


def print_result(result: ExportResult) -> None:
    source = result.source
    what = (
        f"trial {source.trial_number} of study {source.study_name}" if source.kind == "trial" else "the run"
    )
    console = Console(soft_wrap=True)  # a line piped to a log stays one line (rich wraps at 80 columns there)
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
