"""`hpo run --in-process`: every trial in this process, one after another.

For debugging a task with breakpoints, and for quick studies where a process start costs more than a trial. Each trial
still gets fresh arguments, callbacks and tracker runs (`hpo.trial.run`); only the process is shared.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import optuna
import torch
from optuna.trial import FrozenTrial

from hpo.errors import ConfigError, Interrupted
from hpo.scheduling import early_interrupt
from hpo.spec import StudySpec
from hpo.storage import remote
from hpo.storage.retention import after_trial
from hpo.storage.retry import RetryPolicy, fail_running_trial, process_identity
from hpo.storage.stopped import describe_stop, finished_numbers
from hpo.storage.study_db import frozen, remaining_trials, trial_id
from hpo.trial.run import record_outcome, run_trial

TrialReporter = Callable[[FrozenTrial], None]


def check_in_process(spec: StudySpec) -> None:
    if spec.pauses_trials():
        assert spec.study.scheduler is not None
        raise ConfigError(
            f"study.scheduler: {spec.study.scheduler.type} pauses trials and resumes them in worker processes; run "
            "without --in-process"
        )
    ranks = spec.resources.ranks
    if ranks > 1:
        raise ConfigError(
            f"resources.ranks_per_trial: {ranks} ranks per trial need a process each; run without --in-process"
        )


def run_trials_in_process(
    spec: StudySpec,
    study: optuna.Study,
    *,
    n_trials: int | None,
    timeout: float | None,
    report: TrialReporter | None = None,
) -> None:
    """Run trials one after another in this process until `n_trials` (a total for the study) or `timeout` seconds."""
    early_interrupt.raise_if_swallowed()  # a press during the imports: no trial started
    deadline = None if timeout is None else time.monotonic() + timeout
    finished_before = finished_numbers(study)
    while n_trials is None or (remaining_trials(study, n_trials) or 0) > 0:
        if deadline is not None and time.monotonic() >= deadline:
            break
        trial = study.ask()
        for key, value in process_identity().items():
            trial.set_user_attr(
                key, value
            )  # at once: from here on a kill leaves a trial resume can tell is stale
        resume_from = _resume_checkpoint(trial, spec.output_dir)
        if resume_from:
            trial.set_user_attr("resumed_from_trial", trial.user_attrs.get("requeued_from_trial"))
        try:
            with TrialThreads(spec.resources.threads_per_trial):
                outcome = run_trial(spec, study, trial, resume_from=resume_from)
        except KeyboardInterrupt:
            # Queued again at once, as an interrupt (not a crash: it uses up no retry), from its newest checkpoint.
            policy = RetryPolicy.of(spec)
            attrs = {"interrupted": True}
            fail_running_trial(
                study, trial_id(trial), "interrupted", policy, counts_as_retry=False, extra_attrs=attrs
            )
            raise Interrupted(
                f"stopped: {describe_stop(study, str(spec.output_dir), finished_before)}"
            ) from None
        record_outcome(study, trial, outcome)
        after_trial(spec, study)
        if report is not None:
            report(frozen(study, trial))


class TrialThreads:
    """`resources.threads_per_trial` for trials run in this process (when given; else torch's own setting)."""

    def __init__(self, threads: int | None) -> None:
        self.threads = threads
        self.previous: int | None = None

    def __enter__(self) -> None:
        if self.threads:
            self.previous = torch.get_num_threads()
            torch.set_num_threads(int(self.threads))

    def __exit__(self, *exc: Any) -> None:
        if self.previous is not None:
            torch.set_num_threads(self.previous)


def _resume_checkpoint(trial: optuna.Trial, output_dir: str) -> str | None:
    """The retry's checkpoint, fetched from the object store when another machine wrote it (hpo.storage.remote)."""
    path, _ = remote.fetch(trial.user_attrs.get("resume_from"), output_dir)
    return str(path) if path is not None else None
