"""`hpo train run.yaml [--set key=value ...] [--resume [PATH]] [--output-dir DIR]`: one training run from a run file."""

from __future__ import annotations

import os
import shutil
import signal
import threading
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from hpo.cli.app import summary
from hpo.cli.options import out_option, overwrite_option, repeat_command, resume_option, set_option
from hpo.cli.rank_stop import ELASTIC_SIGNALS, ranks_stop_together, report_stop, under_stopping_launcher
from hpo.errors import ConfigError, HpoError, Interrupted
from hpo.scheduling import early_interrupt
from hpo.spec import RunSpec, load_run_spec
from hpo.storage import remote
from hpo.trial.callbacks import on_interrupt
from hpo.trial.single_run import RunStopped, run_training
from trainer.checkpoint import list_checkpoints
from trainer.distributed import exit_rank
from trainer.errors import CheckpointError, NonFiniteLossError
from trainer.launch import is_launched_externally, launch_ranks


@click.command("train", short_help=summary("train"))
@click.argument("run_file", type=click.Path(dir_okay=False))
@set_option
@resume_option
@out_option(
    "Output folder (default: the file's output_dir, else runs/<name>).",
    required=False,
    aliases=("--output-dir",),
)
@click.option(
    "--nproc", type=int, default=1, show_default=True, help="Ranks to start on this node (torch elastic)."
)
@click.option(
    "--strategy",
    type=click.Choice(["auto", "single", "ddp", "fsdp", "deepspeed"]),
    default=None,
    help="Parallelism (sets training.strategy); auto: ddp when several ranks run, deepspeed/fsdp when configured.",
)
@click.option("--nnodes", type=int, default=1, show_default=True, help="Machines taking part (multi-node).")
@click.option(
    "--node-rank", type=int, default=0, show_default=True, help="This machine's index, 0..nnodes-1."
)
@click.option(
    "--master-addr", default="127.0.0.1", show_default=True, help="Address of the node-rank 0 machine."
)
@click.option("--master-port", type=int, default=None, help="Port on the master (free port on one node).")
@overwrite_option
def train(
    run_file: str,
    overrides: tuple[str, ...],
    resume: str | None,
    output_dir: str | None,
    nproc: int,
    strategy: str | None,
    nnodes: int,
    node_rank: int,
    master_addr: str,
    master_port: int | None,
    overwrite: bool,
) -> None:
    """Train one model from a run file.

    RUN_FILE holds the task, model, training and tracking sections. With --nproc N (and --nnodes for several
    machines) the command starts N ranks itself; started by torchrun, `accelerate launch` or the deepspeed launcher
    it trains as the rank it was given. Ctrl-C saves a checkpoint at the next step and stops (again: at once).

    \b
    Example:
      hpo train studies/digits_mlp_run.yaml --set training.learning_rate=3e-4
      hpo train studies/digits_mlp_run.yaml --resume    (continue after a stop)"""
    if not Path(run_file).is_file():
        raise ConfigError(f"{run_file}: no such run file")
    overrides = (*overrides, f"training.strategy={strategy}") if strategy else overrides
    spec = load_run_spec(run_file, overrides=list(overrides), output_dir=output_dir)
    remote.check_store(spec.output_dir, "--output-dir" if output_dir else "output_dir")  # before any training
    if resume is None and node_rank == 0 and os.environ.get("RANK", "0") == "0":
        protect_earlier_run(spec.output_dir, overwrite)
    if (nproc != 1 or nnodes != 1) and not is_launched_externally():
        _train_on_ranks(
            run_file, overrides, resume, output_dir, nproc, nnodes, node_rank, master_addr, master_port
        )
        return
    summary = train_from_spec(spec, resume)
    if os.environ.get("RANK", "0") == "0":
        print_summary(summary)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        exit_rank(0)  # a finished rank leaves without finalization, where DeepSpeed could abort it


def _train_on_ranks(
    run_file: str,
    overrides: tuple[str, ...],
    resume: str | None,
    output_dir: str | None,
    nproc: int,
    nnodes: int,
    node_rank: int,
    master_addr: str,
    master_port: int | None,
) -> None:
    """Start `nproc` ranks running this same command (without the launch flags); each trains as one rank."""
    argv = ["-m", "hpo.cli", "train", run_file, *(f"--set={o}" for o in overrides)]
    if resume is not None:
        argv.append(f"--resume={resume}" if resume != "latest" else "--resume")
    if output_dir is not None:
        argv.append(f"--output-dir={output_dir}")
    try:
        with ranks_stop_together() as stop:
            code = launch_ranks(
                argv, nproc, nnodes, node_rank, master_addr, master_port, signals_to_handle=ELASTIC_SIGNALS
            )
            if code != 0 and (stop.presses or code == Interrupted.exit_code):
                raise stop.interrupted(continue_with=repeat_command(drop=["overwrite", "resume"]))
    except ValueError as error:
        raise ConfigError(str(error)) from error
    if code != 0:
        failure = ConfigError if code == ConfigError.exit_code else HpoError
        raise failure(f"training failed on a rank of {nproc * nnodes} (its error is shown above)")


def protect_earlier_run(
    output_dir: str, overwrite: bool, *, folder_option: str = "--output-dir", resumable: bool = True
) -> None:
    """A fresh run in a folder holding an earlier run's checkpoints would mix the two: its checkpoint rotation deletes
    the earlier ones (their best included) and `--resume` would pick the earlier run's newest. Refuse, as the Hugging
    Face example scripts do, unless told to overwrite; then delete the earlier run's checkpoints and metrics first."""
    found = list_checkpoints(output_dir)
    if not found:
        return
    if not overwrite:
        resume = "--resume to continue that run, " if resumable else ""
        raise ConfigError(
            f"{output_dir} already holds checkpoints of an earlier run (newest: {found[-1].name}): add {resume}"
            f"--overwrite to start afresh there (deletes them), or give another {folder_option}"
        )
    for folder in Path(output_dir).glob("checkpoint-*"):
        if folder.is_dir():
            shutil.rmtree(folder)
    Path(output_dir, "metrics.json").unlink(missing_ok=True)


def train_from_spec(spec: RunSpec, resume: str | None) -> dict[str, Any]:
    """Run the training; a loss that stays non-finite becomes a clear error (exit 1) instead of a traceback.

    Ctrl-C of a one-process run saves a checkpoint at the next step and stops (a second one stops at once); the
    message says what was saved and the command that continues."""
    # One process, or a rank of `hpo train --nproc N` (its launcher leaves Ctrl-C to the ranks and says it once).
    stoppable = int(os.environ.get("WORLD_SIZE", "1")) == 1 or under_stopping_launcher()
    previous = signal.signal(signal.SIGINT, on_interrupt) if stoppable and _main_thread() else None
    try:
        early_interrupt.raise_if_swallowed()
        return run_training(spec, resume=True if resume == "latest" else resume, stoppable=stoppable)
    except RunStopped as stop:
        if under_stopping_launcher():
            report_stop(str(stop), stop.checkpoint)
            exit_rank(Interrupted.exit_code)
        again = ["--resume"] if stop.checkpoint else []
        drop = ["overwrite", "resume"] if stop.checkpoint else ["overwrite"]
        raise Interrupted(f"{stop}; continue with: {repeat_command(drop=drop, add=again)}") from None
    except KeyboardInterrupt:  # while the data or the model loaded: no training step ran
        if under_stopping_launcher():
            report_stop("stopped before training started: nothing was saved", None)
            exit_rank(Interrupted.exit_code)
        raise Interrupted(
            f"stopped before training started: nothing was saved; continue with: "
            f"{repeat_command(drop=['overwrite'])}"
        ) from None
    except CheckpointError as error:  # a checkpoint refused (a pickle that runs code, no safetensors weights)
        if resume is None:
            raise
        raise ConfigError(f"--resume: {error}") from error
    except NonFiniteLossError as error:
        raise HpoError(
            f"training diverged: {error}\n"
            "Try a lower training.learning_rate, gradient clipping (training.max_grad_norm), or warmup "
            "(training.warmup_ratio); resume from the last good checkpoint with --resume PATH."
        ) from error
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def print_summary(summary: dict[str, Any]) -> None:
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
    console = Console(soft_wrap=True)  # a line piped to a log stays one line (rich wraps at 80 columns there)
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
