"""The study manager: open (or continue) the Optuna study a study file describes, and run its trials.

    spec = load_study_spec("studies/digits_mlp.yaml")
    dry_run(spec)                         # refuse a metric evaluation does not produce (hpo.spec.dry_run)
    study = open_study(spec)              # sampler, pruner, directions, storage; enqueued trials; stale trials re-queued
    execute(spec, study, ...)             # trials until n_trials (a total over every run of the study) or the timeout
    summary = summarize(spec, study)

`run_study(path, **overrides)` does all of it. Running it again on the same study continues it: finished trials stay,
n_trials counts them, and trials whose process died are failed and queued again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpo.disk import enforce_keep_checkpoints
from hpo.errors import ConfigError, HpoError
from hpo.objectives import study_directions
from hpo.resume import requeue_stale_trials
from hpo.spec.errors import FieldProblem
from hpo.storage import create_storage, redact, sqlite_path
from hpo.summary import StudySummary, TrialSummary, best_trials, summarize
from hpo.trial import process_identity, record_outcome, run_trial

__all__ = ["StudySummary", "TrialSummary", "best_trials", "open_study", "run_study", "summarize"]

TrialReporter = Callable[[FrozenTrial], None]


# ---- opening -------------------------------------------------------------------------------------------------------
def storage_url(spec: Any, storage: str | None = None) -> str:
    """`--storage` wins, then the file's `study.storage`, then a SQLite file in the study's output folder."""
    return str(storage or spec.storage)


def build_sampler(spec: Any, seed_offset: int = 0) -> optuna.samplers.BaseSampler:
    """The file's sampler. `seed_offset` shifts its seed (per worker, and per resumed run), so that processes sharing
    a study do not draw the same points; a fresh study in one process uses the file's seed exactly."""
    section = spec.study.sampler
    if seed_offset and section.seed is not None:
        section = section.model_copy(update={"seed": section.seed + seed_offset})
    grid = (
        {name: p.grid_values() for name, p in spec.sampled_params().items()}
        if section.type == "grid"
        else None
    )
    try:
        return section.build(grid)
    except FieldProblem as problem:
        raise ConfigError(f"study.sampler.{problem.field}: {problem.message}") from problem


def build_pruner(spec: Any) -> optuna.pruners.BasePruner:
    try:
        return spec.study.pruner.build() if spec.study.pruner is not None else optuna.pruners.NopPruner()
    except FieldProblem as problem:
        raise ConfigError(f"study.pruner.{problem.field}: {problem.message}") from problem


def open_study(spec: Any, *, storage: str | None = None, worker_index: int = 0) -> optuna.Study:
    """Create the study, or load it when it exists, with the file's sampler, pruner and directions; enqueue its
    `enqueue:` trials once (a re-run does not enqueue them again)."""
    url = storage_url(spec, storage)
    backend = create_storage(url)  # SQLite in WAL mode with busy timeouts, or PostgreSQL (hpo.storage)
    directions = study_directions(spec.study)
    existing = _existing_trial_count(backend, spec.study.name)
    sampler = build_sampler(spec, seed_offset=worker_index * 100_003 + existing)
    pruner = build_pruner(spec)
    study = optuna.create_study(
        storage=backend,
        study_name=spec.study.name,
        sampler=sampler,
        pruner=pruner,
        directions=directions,
        load_if_exists=True,
    )
    stored = [d.name.lower() for d in study.directions]
    if stored != directions:
        raise ConfigError(
            f"study.direction: the stored study '{spec.study.name}' in {redact(url)} optimises {stored}, the file says "
            f"{directions}; use another study.name or --storage"
        )
    for params in getattr(spec.study, "enqueue", None) or []:
        study.enqueue_trial(dict(params), skip_if_exists=True)
    return study


def load_existing_study(spec: Any, storage: str | None = None) -> optuna.Study:
    """The study for reading (status, best): an error, not an empty new study, when it does not exist."""
    url = storage_url(spec, storage)
    database = sqlite_path(url) if url.startswith("sqlite") else None
    if database is not None and not database.exists():
        raise HpoError(f"no study database at {database}; run `hpo run` on the study file first")
    try:
        return optuna.load_study(study_name=spec.study.name, storage=create_storage(url))
    except KeyError as error:
        raise HpoError(f"no study named '{spec.study.name}' in {redact(url)}; run `hpo run` first") from error


def _existing_trial_count(backend: optuna.storages.BaseStorage, name: str) -> int:
    try:
        return len(backend.get_all_trials(backend.get_study_id_from_name(name), deepcopy=False))
    except KeyError:
        return 0


# ---- counting -------------------------------------------------------------------------------------------------------
def counted_trials(study: optuna.Study) -> int:
    """Trials that count toward n_trials: finished ones and running ones (a stale trial that was queued again counts
    once, as its retry)."""
    count = 0
    for trial in study.get_trials(deepcopy=False):
        if trial.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING):
            count += 1
        elif trial.state == TrialState.FAIL and not trial.user_attrs.get("requeued"):
            count += 1
    return count


def remaining_trials(study: optuna.Study, n_trials: int | None) -> int | None:
    return None if n_trials is None else max(0, n_trials - counted_trials(study))


def keep_top_k(spec: Any) -> int | None:
    """`keep_checkpoints: {top_k: k}` (default 1); `top_k: null` keeps every checkpoint."""
    return spec.study.keep_checkpoints.top_k


# ---- executing ------------------------------------------------------------------------------------------------------
def after_trial(spec: Any, study: optuna.Study) -> None:
    """Housekeeping after any trial ends (also for schedulers): bound the disk."""
    enforce_keep_checkpoints(study, spec, keep_top_k(spec))


def run_trials_in_process(
    spec: Any,
    study: optuna.Study,
    *,
    n_trials: int | None,
    timeout: float | None,
    report: TrialReporter | None = None,
) -> None:
    """Run trials one after another in this process until `n_trials` (a total for the study) or `timeout` seconds.

    `hpo run` normally runs each trial in a fresh process (`hpo.scheduler`); this executor is `hpo run --in-process`,
    for debugging a task with breakpoints, and for quick studies where a process start costs more than a trial."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while n_trials is None or (remaining_trials(study, n_trials) or 0) > 0:
        if deadline is not None and time.monotonic() >= deadline:
            break
        trial = study.ask()
        for key, value in process_identity().items():
            trial.set_user_attr(
                key, value
            )  # at once: from here on a kill leaves a trial resume can tell is stale
        resume_from = _resume_checkpoint(trial)
        if resume_from:
            trial.set_user_attr("resumed_from_trial", trial.user_attrs.get("requeued_from_trial"))
        with _TrialThreads(spec):
            outcome = run_trial(spec, study, trial, resume_from=resume_from)
        record_outcome(study, trial, outcome)
        after_trial(spec, study)
        if report is not None:
            report(study._storage.get_trial(trial._trial_id))  # noqa: SLF001


def _check_in_process(spec: Any) -> None:
    ranks = getattr(spec.resources, "ranks_per_trial", None) or 1
    if ranks > 1:
        raise ConfigError(
            f"resources.ranks_per_trial: {ranks} ranks per trial need a process each; run without --in-process"
        )


class _TrialThreads:
    """`resources.threads_per_trial` for trials run in this process (when given; else torch's own setting)."""

    def __init__(self, spec: Any) -> None:
        self.threads = getattr(getattr(spec, "resources", None), "threads_per_trial", None)
        self.previous: int | None = None

    def __enter__(self) -> None:
        if self.threads:
            import torch

            self.previous = torch.get_num_threads()
            torch.set_num_threads(int(self.threads))

    def __exit__(self, *exc: Any) -> None:
        if self.previous is not None:
            import torch

            torch.set_num_threads(self.previous)


def _resume_checkpoint(trial: optuna.Trial) -> str | None:
    path = trial.user_attrs.get("resume_from")
    return path if path and Path(path).is_dir() else None


class FailureLimit:
    """`study.max_failures`: wraps the per-trial report and stops the study (HpoError) after that many trials of this
    run failed by themselves (a crashed trial queued again is not counted: its retry is)."""

    def __init__(self, limit: int | None, report: TrialReporter | None) -> None:
        self.limit, self.report, self.failures = limit, report, 0

    def __call__(self, trial: FrozenTrial) -> None:
        if self.report is not None:
            self.report(trial)
        if trial.state != TrialState.FAIL or trial.user_attrs.get("requeued"):
            return
        self.failures += 1
        if self.limit is not None and self.failures >= self.limit:
            raise HpoError(
                f"study stopped: {self.failures} trials failed in this run (study.max_failures = {self.limit}); "
                f"last error: {trial.user_attrs.get('error')}. Fix it and run again: finished trials are kept"
            )


def execute(
    spec: Any,
    study: optuna.Study,
    *,
    n_trials: int | None,
    timeout: float | None,
    workers: int | None = None,
    gpus: Sequence[int] | None = None,
    report: TrialReporter | None = None,
    in_process: bool = False,
) -> None:
    """Run the study's trials: each in a fresh process through the scheduler, or all in this one (`in_process`)."""
    report = FailureLimit(spec.study.max_failures, report)
    if in_process:
        _check_in_process(spec)
        run_trials_in_process(spec, study, n_trials=n_trials, timeout=timeout, report=report)
        return
    from hpo.scheduler import run_trials

    run_trials(spec, study, n_trials=n_trials, timeout=timeout, workers=workers, gpus=gpus, report=report)


# ---- the whole run --------------------------------------------------------------------------------------------------
def run_loaded_study(
    spec: Any,
    *,
    n_trials: int | None = None,
    timeout: float | None = None,
    storage: str | None = None,
    workers: int | None = None,
    gpus: Sequence[int] | None = None,
    report: TrialReporter | None = None,
    dry_run: bool = True,
    in_process: bool = False,
) -> StudySummary:
    started = time.monotonic()
    n_trials = n_trials if n_trials is not None else getattr(spec.study, "n_trials", None)
    timeout = timeout if timeout is not None else getattr(spec.study, "timeout", None)
    if n_trials is None and timeout is None:
        raise ConfigError(
            "study.n_trials: give n_trials or timeout (or --n-trials / --timeout), else it never ends"
        )
    if dry_run:
        # Refuse an objective metric that evaluation does not produce before any trial trains (exit 2).
        from hpo.spec.dry_run import dry_run as check_metrics

        check_metrics(spec)
    study = open_study(spec, storage=storage)
    requeue_stale_trials(study, spec)
    execute(
        spec,
        study,
        n_trials=n_trials,
        timeout=timeout,
        workers=workers,
        gpus=gpus,
        report=report,
        in_process=in_process,
    )
    after_trial(spec, study)
    return summarize(spec, study, storage, duration_s=time.monotonic() - started)


def overrides_from_kwargs(kwargs: dict[str, Any]) -> list[str]:
    """`training__learning_rate=1e-3` -> `training.learning_rate=0.001` (the `--set` form)."""
    # JSON is YAML flow syntax: numbers, strings, lists and mappings survive the round trip exactly.
    return [f"{key.replace('__', '.')}={json.dumps(value)}" for key, value in kwargs.items()]


def run_study(
    path: str | Path,
    *,
    n_trials: int | None = None,
    timeout: float | None = None,
    storage: str | None = None,
    set: Sequence[str] = (),  # noqa: A002 - mirrors `--set`
    workers: int | None = None,
    gpus: Sequence[int] | None = None,
    report: TrialReporter | None = None,
    dry_run: bool = True,
    in_process: bool = False,
    **overrides: Any,
) -> StudySummary:
    """`hpo run` as a function. Extra keyword arguments are `--set` overrides with `__` for dots:
    `run_study("s.yaml", n_trials=4, training__max_steps=20)`. `in_process=True` runs every trial in this process
    (for debugging); by default each trial runs in a fresh process."""
    from hpo.spec import load_study_spec

    spec = load_study_spec(path, overrides=[*set, *overrides_from_kwargs(overrides)], storage=storage)
    return run_loaded_study(
        spec,
        n_trials=n_trials,
        timeout=timeout,
        storage=storage,
        workers=workers,
        gpus=gpus,
        report=report,
        dry_run=dry_run,
        in_process=in_process,
    )
