"""The study manager: open (or continue) the Optuna study a study file describes, and run its trials.

    spec = load_study_spec("studies/digits_mlp.yaml")
    start_workers_ahead(...)              # worker processes import torch meanwhile (hpo.scheduling.spawn)
    dry_run(spec)                         # refuse a metric evaluation does not produce (hpo.trial.dry_run)
    study = open_study(spec)              # sampler, pruner, directions, storage; enqueued trials (hpo.storage.study_db);
                                          # an output folder holding another study's trials is refused (folder_owner)
    requeue_stale_trials(study, spec)     # trials whose process died are failed and queued again (hpo.storage.retry)
    execute(spec, study, ...)             # trials until n_trials (a total over every run of the study) or the timeout
    summary = summarize(spec, study)

`run_study(path, **overrides)` does all of it. Running it again on the same study continues it: finished trials stay,
n_trials counts them, and trials whose process died are failed and queued again. `join_study` is the same for
`hpo worker`, which adds this machine's slots to a study other machines run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpo.errors import ConfigError, HpoError
from hpo.scheduling.devices import DeviceId
from hpo.scheduling.pool import run_trials
from hpo.scheduling.spawn import StartedAhead, start_workers_ahead
from hpo.spec import StudySpec, load_study_spec
from hpo.storage import outage
from hpo.storage.folder_owner import open_study_in_its_folder
from hpo.storage.retention import after_trial
from hpo.storage.retry import requeue_stale_trials
from hpo.study.in_process import check_in_process, run_trials_in_process
from hpo.study.summary import StudySummary, summarize
from hpo.trial.dry_run import dry_run as check_metrics

TrialReporter = Callable[[FrozenTrial], None]


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
    spec: StudySpec,
    study: optuna.Study,
    *,
    n_trials: int | None,
    timeout: float | None,
    workers: int | None = None,
    gpus: Sequence[DeviceId] | None = None,
    report: TrialReporter | None = None,
    in_process: bool = False,
    ahead: StartedAhead | None = None,
) -> None:
    """Run the study's trials: each in a trial process under the scheduler, or all in this one (`in_process`).
    `ahead`: the scheduler's worker processes, started while the study was being checked and opened."""
    report = FailureLimit(spec.study.max_failures, report)
    if in_process:
        check_in_process(spec)
        run_trials_in_process(spec, study, n_trials=n_trials, timeout=timeout, report=report)
        return
    run_trials(
        spec,
        study,
        n_trials=n_trials,
        timeout=timeout,
        workers=workers,
        gpus=gpus,
        report=report,
        ahead=ahead,
    )


def trial_budget(
    spec: StudySpec, n_trials: int | None, timeout: float | None
) -> tuple[int | None, float | None]:
    """`--n-trials` / `--timeout` win over the file's; a study with neither would never end."""
    n_trials = n_trials if n_trials is not None else spec.study.n_trials
    timeout = timeout if timeout is not None else spec.study.timeout
    if n_trials is None and timeout is None:
        raise ConfigError(
            "study.n_trials: give n_trials or timeout (or --n-trials / --timeout), else it never ends"
        )
    return n_trials, timeout


def run_loaded_study(
    spec: StudySpec,
    *,
    n_trials: int | None = None,
    timeout: float | None = None,
    storage: str | None = None,
    workers: int | None = None,
    gpus: Sequence[DeviceId] | None = None,
    report: TrialReporter | None = None,
    dry_run: bool = True,
    in_process: bool = False,
    ahead: StartedAhead | None = None,
) -> StudySummary:
    """Check the study (dry run), open it and run its trials. `ahead`: worker processes the caller already started
    (`hpo run` starts them before it imports torch); else they start here, before the dry run."""
    started = time.monotonic()
    n_trials, timeout = trial_budget(spec, n_trials, timeout)
    outage.set_timeout(spec.storage_options.outage_timeout)  # how long this process waits for the storage
    # The workers import torch and the trial code (seconds) while this process checks the file and opens the study;
    # on any error before the trials start they are ended.
    if ahead is None and not in_process:
        ahead = start_workers_ahead(spec.resources, spec.output_dir, workers=workers, gpus=gpus)
    with ahead or StartedAhead({}):
        # Refuse an objective metric evaluation does not produce, before any trial trains (exit 2).
        if dry_run:
            check_metrics(spec)
        study = open_study_in_its_folder(spec, storage=storage)
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
            ahead=ahead,
        )
    after_trial(spec, study)
    return summarize(spec, study, storage, duration_s=time.monotonic() - started)


def join_study(
    spec: StudySpec,
    *,
    n_trials: int | None = None,
    timeout: float | None = None,
    storage: str | None = None,
    workers: int | None = None,
    gpus: Sequence[DeviceId] | None = None,
    report: TrialReporter | None = None,
) -> optuna.Study:
    """`hpo worker`: run this machine's slots on a study that other machines may be running too."""
    n_trials, timeout = trial_budget(spec, n_trials, timeout)
    outage.set_timeout(spec.storage_options.outage_timeout)
    # The workers load while the study opens.
    with start_workers_ahead(spec.resources, spec.output_dir, workers=workers, gpus=gpus) as ahead:
        study = open_study_in_its_folder(spec, storage=storage)
        requeue_stale_trials(study, spec)  # trials this host left running
        run_trials(
            spec,
            study,
            n_trials=n_trials,
            timeout=timeout,
            workers=workers,
            gpus=gpus,
            report=report,
            ahead=ahead,
        )
    return study


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
    gpus: Sequence[DeviceId] | None = None,
    report: TrialReporter | None = None,
    dry_run: bool = True,
    in_process: bool = False,
    **overrides: Any,
) -> StudySummary:
    """`hpo run` as a function. Extra keyword arguments are `--set` overrides with `__` for dots:
    `run_study("s.yaml", n_trials=4, training__max_steps=20)`. `in_process=True` runs every trial in this process
    (for debugging); by default trials run in trial processes forked from the workers."""
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
