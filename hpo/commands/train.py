"""`hpo train run.yaml [--set key=value ...] [--resume [PATH]] [--output-dir DIR]`: one training run from a run file."""

from __future__ import annotations

import os
from typing import Any

import click

from hpo.errors import HpoError


@click.command()
@click.argument("run_file", type=click.Path(dir_okay=False))
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a value of the file (YAML value, dotted key), e.g. --set training.learning_rate=3e-4.",
)
@click.option(
    "--resume",
    is_flag=False,
    flag_value="latest",
    default=None,
    metavar="[PATH]",
    help="Resume from the newest complete checkpoint in the output folder, or from PATH.",
)
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Output folder (default: the file's output_dir, else runs/<name>).",
)
def train(run_file: str, overrides: tuple[str, ...], resume: str | None, output_dir: str | None) -> None:
    """Train one model from RUN_FILE (a run file: task, model, training, tracking)."""
    from hpo.spec import load_run_spec

    spec = load_run_spec(run_file, overrides=list(overrides), output_dir=output_dir)
    summary = train_from_spec(spec, resume)
    if os.environ.get("RANK", "0") == "0":
        print_summary(summary)


def train_from_spec(spec: Any, resume: str | None) -> dict[str, Any]:
    """Run the training; a loss that stays non-finite becomes a clear error (exit 1) instead of a traceback."""
    from hpo.run import run_training
    from trainer.errors import NonFiniteLossError

    try:
        return run_training(spec, resume=True if resume == "latest" else resume)
    except NonFiniteLossError as error:
        raise HpoError(
            f"training diverged: {error}\n"
            "Try a lower training.learning_rate, gradient clipping (training.max_grad_norm), or warmup "
            "(training.warmup_ratio); resume from the last good checkpoint with --resume PATH."
        ) from error


def print_summary(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"run {summary['name']}: {summary['global_step']} steps in {summary['wall_time_s']:.1f} s",
        title_justify="left",
    )
    table.add_column("metric")
    table.add_column("final", justify="right")
    best = summary.get("best") or {}
    table.add_column(f"best (step {best.get('step', '-')})", justify="right")
    best_metrics = best.get("metrics") or {}
    for name in sorted(set(summary["final"]) | set(best_metrics)):
        if name.endswith(("_runtime", "_per_second")):  # speed, not quality: in metrics.json
            continue
        table.add_row(name, _number(summary["final"].get(name)), _number(best_metrics.get(name)))
    table.add_row("train_loss", _number(summary.get("training_loss")), "")
    console = Console()
    console.print(table)
    if best.get("checkpoint"):
        console.print(
            f"best checkpoint ({best['metric']} = {_number(best.get('value'))}): {best['checkpoint']}"
        )
    console.print(f"metrics written to {summary['output_dir']}/metrics.json")


def _number(value: Any) -> str:
    if value is None:
        return ""
    return f"{value:.4g}" if isinstance(value, float) else str(value)
