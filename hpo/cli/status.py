"""`hpo status study.yaml`: a table of the study's trials (number, state, value, params, duration, pruned at step, and
peak memory when the trials recorded it: GPU memory PyTorch reserved at most, and the process's peak RSS; the parameters
each trial trained and the size of its checkpoint, which an adapter (peft:) study keeps small)."""

from __future__ import annotations

import time
from pathlib import Path

import click
import optuna
from optuna.trial import FrozenTrial, TrialState
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from hpo.cli.app import summary
from hpo.cli.options import format_params, format_values, load_study, study_arguments
from hpo.integrations.slurm import recorded_jobs, task_states
from hpo.scheduling.rung_view import promotion_overhead, rung_rows, state_label, trial_path
from hpo.scheduling.view import print_live_slots
from hpo.spec import StudySpec
from hpo.storage.lineage import current_params, segments
from hpo.storage.pause import pause_info
from hpo.storage.study_db import load_existing_study
from hpo.study.summary import summarize

STATE_STYLES = {
    "COMPLETE": "green",
    "PRUNED": "yellow",
    "FAIL": "red",
    "RUNNING": "cyan",
    "WAITING": "dim",
    "PAUSED": "magenta",
    "REQUEUED": "blue",
}


@click.command("status", short_help=summary("status"))
@study_arguments
def status(study_file: Path, storage: str | None, overrides: tuple[str, ...]) -> None:
    """Show the trials of a study.

    Every trial of the study in STUDY_FILE (read-only; works while `hpo run` is running).

    \b
    Example:
      hpo status studies/digits_mlp.yaml"""
    spec = load_study(study_file, storage, overrides)
    study = load_existing_study(spec, storage)
    summary = summarize(spec, study, storage)
    best = {t.number for t in summary.best_trials}
    title = f"{summary.study_name} ({', '.join(f'{m} {d}' for m, d in zip(summary.metrics, summary.directions, strict=True))})"
    trials = study.get_trials(deepcopy=False)
    # Stop-type ASHA rungs are a pruner's (trials show "pruned at"); rung paths are for paused trials.
    scheduler = (
        spec.study.scheduler.type if spec.study.scheduler is not None and spec.pauses_trials() else None
    )
    asha = scheduler == "asha"
    groups = _column_groups(trials, scheduler)
    rows = [_row(trial, best, scheduler) for trial in trials]
    console = Console()
    for table in _tables(console, title, groups, rows):
        console.print(table)
    for trial in trials:
        if _shown_state(trial) in ("FAIL", "REQUEUED"):
            console.print(_failure_note(trial.number, trial.user_attrs), markup=False, highlight=False)
    counts = ", ".join(f"{n} {state.lower()}" for state, n in summary.counts.items()) or "no trials"
    console.print(f"{counts}; * = best" + (" (Pareto front)" if len(summary.directions) > 1 else ""))
    if asha:
        _print_rungs(console, spec, study)
    print_live_slots(console, spec, spec.study.n_trials)  # the slots of a run in progress on this machine
    _print_slurm_jobs(console, spec)


# Columns that may wrap (between words); every other column keeps its cells whole on one line.
WRAPPING = ("value", "params", "rungs", "copied from")
# Columns that read left to right; numbers line up on the right.
LEFT = ("state", "value", "params", "rungs", "copied from")


def _shown_state(trial: FrozenTrial) -> str:
    """REQUEUED for a failed attempt whose retry was queued (interrupted, crashed, out of GPU memory beside others), as
    the counts below the table and the dashboard say; else the state (PAUSED for a trial waiting at an ASHA rung)."""
    if trial.state == TrialState.FAIL and trial.user_attrs.get("requeued"):
        return "REQUEUED"
    return state_label(trial)


def _column_groups(trials: list[FrozenTrial], scheduler: str | None) -> list[tuple[str, ...]]:
    """The table's columns in groups, most important first: the first group always stays in the main table; the
    others (ASHA's path, memory, footprint) appear only when some trial has them. A PBT member is never pruned: its
    step and copies take that place."""
    if scheduler == "pbt":
        groups = [("#", "state", "value", "params", "time (s)", "step", "copied from")]
    else:
        groups = [("#", "state", "value", "params", "time (s)", "pruned at")]
    if scheduler == "asha":
        groups.append(("rungs",))
    if any("peak_rss" in t.user_attrs or "peak_gpu_memory" in t.user_attrs for t in trials):
        groups.append(("peak gpu", "peak rss"))
    if any("checkpoint_bytes" in t.user_attrs or "trainable_params" in t.user_attrs for t in trials):
        groups.append(("trained params", "checkpoint"))
    return groups


def _row(trial: FrozenTrial, best: set[int], scheduler: str | None) -> dict[str, str | Text]:
    """One trial's cells, by column name (a table picks the columns it shows). Params are the values the trial
    trains with now: a PBT member's latest (hpo.storage.lineage), as `hpo run` and `hpo best` show them."""
    attrs = trial.user_attrs
    state = _shown_state(trial)
    duration = attrs.get("duration_s")
    if duration is None and trial.datetime_start and trial.datetime_complete:
        duration = (trial.datetime_complete - trial.datetime_start).total_seconds()
    return {
        "#": f"{trial.number}{' *' if trial.number in best else ''}",
        "state": Text(state, style=STATE_STYLES.get(state, "")),
        "value": format_values(list(trial.values) if trial.values is not None else None),
        "params": format_params(current_params(trial)),
        "time (s)": "-" if duration is None else f"{duration:.1f}",
        "pruned at": "-" if attrs.get("pruned_step") is None else str(attrs["pruned_step"]),
        "rungs": trial_path(trial) if scheduler == "asha" else "",
        "step": _member_step(trial),
        "copied from": ", ".join(
            f"{s.source} at step {s.step}" for s in segments(trial) if s.source is not None
        )
        or "-",
        "peak gpu": _size(attrs.get("peak_gpu_memory")),
        "peak rss": _size(attrs.get("peak_rss")),
        "trained params": _count(attrs.get("trainable_params")),
        "checkpoint": _size(attrs.get("checkpoint_bytes")),
    }


def _member_step(trial: FrozenTrial) -> str:
    """Where a PBT member is: the step it ended at, waits paused at, or last reported (while it trains)."""
    if trial.user_attrs.get("global_step") is not None and trial.state.is_finished():
        return str(trial.user_attrs["global_step"])
    paused = pause_info(trial)
    if paused:
        return str(paused["step"])
    return str(max(trial.intermediate_values, default=0))


def _tables(
    console: Console, title: str, groups: list[tuple[str, ...]], rows: list[dict[str, str | Text]]
) -> list[Table]:
    """One table when it fits the terminal. Otherwise the trailing groups move, one by one, to a second table keyed
    by trial number: rich shrinks a table too wide for its unwrappable columns evenly, down to nothing (an
    80-column terminal, or a pipe, lost the trial numbers and params that way)."""
    for split in range(len(groups), 1, -1):
        main = _table(console, title, [c for group in groups[:split] for c in group], rows)
        if _fits(console, main):
            break
    else:
        split = 1
        main = _table(console, title, list(groups[0]), rows)
    rest = [c for group in groups[split:] for c in group]
    return [main] + ([_table(console, None, ["#", *rest], rows)] if rest else [])


def _table(
    console: Console, title: str | None, columns: list[str], rows: list[dict[str, str | Text]]
) -> Table:
    table = Table(title=title)
    for column in columns:
        # Short, unwrapped columns leave the width to the params, which wrap whole instead of being cut with "…".
        table.add_column(
            column,
            justify="left" if column in LEFT else "right",
            no_wrap=column not in WRAPPING,
            overflow="fold",
        )
    for row in rows:
        table.add_row(*(row[column] for column in columns))
    return table


def _fits(console: Console, table: Table) -> bool:
    """Whether each column gets its narrowest readable width: the unwrapped cells whole, the wrapping ones their
    longest word."""
    unbounded = console.options.update_width(1_000_000)
    return Measurement.get(console, unbounded, table).minimum <= console.width


def _count(count: int | None) -> str:
    """Parameters: 12.3M, 98.3k."""
    if count is None:
        return "-"
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if count >= size:
            return f"{count / size:.1f}{unit}"
    return str(count)


def _print_rungs(console: Console, spec: StudySpec, study: optuna.Study) -> None:
    """The ASHA rungs: how many trials reached each, wait paused there, and were promoted from it, and whether its rank
    gate lets it judge yet (the correlation of its values with the final scores)."""
    assert spec.study.scheduler is not None
    unit = spec.study.scheduler.resource
    table = Table(title=f"rungs (reduction factor {spec.study.scheduler.reduction_factor})")
    for column in ("rung", unit, "reached", "paused", "promoted", "rank gate"):
        table.add_column(column, justify="right")
    for row in rung_rows(study, spec):
        table.add_row(*(str(row[key]) for key in ("rung", "level", "reached", "paused", "promoted", "gate")))
    console.print(table)
    overhead = promotion_overhead(study.get_trials(deepcopy=False))
    if overhead is not None:
        console.print(
            f"per promotion ({overhead['promotions']}): pause {overhead['pause_s']:.2f} s (save + exit), resume "
            f"{overhead['resume_s']:.2f} s (restart + restore, to the first step)"
        )


def _print_slurm_jobs(console: Console, spec: StudySpec) -> None:
    """The study's SLURM jobs (`hpo run --launcher slurm`), each task's state from squeue (or sacct), `ended` for a
    task the cluster no longer lists. Nothing when the study was never submitted."""
    jobs = recorded_jobs(spec.output_dir)
    if not jobs:
        return
    table = Table(title="SLURM jobs")
    for column in ("job", "tasks", "submitted", "task states"):
        table.add_column(column, justify="left")
    for job in jobs:
        states = task_states(job["job_id"], job["tasks"])
        counted: dict[str, list[int]] = {}
        for task, state in states.items():
            counted.setdefault(state.lower(), []).append(task)
        text = "; ".join(f"{state}: {', '.join(map(str, tasks))}" for state, tasks in counted.items())
        submitted = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(job["submitted"]))
        table.add_row(job["job_id"], str(job["tasks"]), submitted, text)
    console.print(table)


def _size(count: int | None) -> str:
    if count is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} B"


def _failure_note(number: int, attrs: dict) -> str:
    """Why a trial failed, and whether it was queued again (an interrupted trial is FAIL here but not lost)."""
    reason = attrs.get("error") or "no error recorded"
    again = " (queued again: the next `hpo run` resumes it)" if attrs.get("requeued") else ""
    return f"trial {number} failed: {reason}{again}"
