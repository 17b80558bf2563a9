"""Bounded disk: keep only the best checkpoint of the top-k finished trials, and everything of running trials.

Every trial writes checkpoints into `trial-<number>/checkpoint-<step>/`. Left alone, a 200-trial study keeps 200 trials'
worth of them. After each trial ends, `enforce_keep_checkpoints` deletes:
- every checkpoint of PRUNED and FAILED trials (except a crashed trial's whose retry will resume from it, and any
  checkpoint a WAITING or RUNNING trial names as `resume_from`, however many retries back it was written, and the
  best checkpoint of every trial such a retry descends from),
- every checkpoint of COMPLETE trials outside the top k,
- every checkpoint but the best one of COMPLETE trials in the top k.
RUNNING and WAITING trials are never touched. So the checkpoints on disk are at most k plus those of the running trials,
whatever n_trials is. The trial folders themselves (logs, metrics) stay.
"""

from __future__ import annotations

from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpo.spec import StudySpec
from hpo.storage import remote
from hpo.storage.attempts import ancestors
from hpo.storage.best import ranked_complete
from hpo.storage.run_dirs import trial_run_dir
from trainer.checkpoint_names import latest_checkpoint

CHECKPOINT_PREFIX = "checkpoint-"


def top_trials(study: optuna.Study, k: int, trials: list[FrozenTrial] | None = None) -> list[FrozenTrial]:
    """The k best COMPLETE trials: by value with one objective; with several, each objective's k best of the Pareto
    front (in the first objective's order). `hpo export --metric M` takes the front's best at M, so every metric's best
    keeps its checkpoint (by the first objective alone, the front's best at the others lost theirs). `trials`: the
    study's trials when the caller has just read them (each read goes to the database)."""
    if k <= 0:
        return []
    trials = study.get_trials(deepcopy=False) if trials is None else trials
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    if len(study.directions) > 1:
        front = study.best_trials
        chosen: dict[int, FrozenTrial] = {}
        for index, direction in enumerate(study.directions):
            maximize = direction == optuna.study.StudyDirection.MAXIMIZE
            for trial in sorted(front, key=lambda t: t.values[index], reverse=maximize)[:k]:
                chosen[trial.number] = trial
        first_max = study.directions[0] == optuna.study.StudyDirection.MAXIMIZE
        return sorted(chosen.values(), key=lambda t: t.values[0], reverse=first_max)
    return ranked_complete(study, complete)[:k]


def checkpoints_in(run_dir: Path, output_dir: str | Path | None = None) -> list[Path]:
    """Checkpoint folders, including the temporary `.checkpoint-<step>.tmp` a killed save leaves behind; with a URL
    output folder, those in the object store too (with or without their marker: a killed upload's)."""
    if output_dir is not None:
        return remote.checkpoints(run_dir, output_dir)
    if not run_dir.is_dir():
        return []
    return sorted(
        p for p in run_dir.iterdir() if p.is_dir() and p.name.lstrip(".").startswith(CHECKPOINT_PREFIX)
    )


def kept_checkpoint(trial: FrozenTrial, run_dir: Path, output_dir: str | Path | None = None) -> Path | None:
    """The one checkpoint a top trial keeps: its best one, or its newest when no best was recorded."""
    best = trial.user_attrs.get("best_checkpoint")
    if output_dir is not None:
        if best and remote.exists(best, output_dir):
            return remote.localize(best, output_dir)
        return remote.latest(run_dir, output_dir)
    if best and Path(best).is_dir():
        return Path(best)
    return latest_checkpoint(run_dir)


def pending_resume_points(pending: list[FrozenTrial], output_dir: str | Path | None = None) -> set[Path]:
    """The checkpoints WAITING and RUNNING trials resume from. After chained retries (a retry that crashed before its
    first save is queued to resume from the checkpoint it was given) that can be a trial several retries back. Paths
    another machine recorded are read as this machine's mirror's (hpo.storage.remote)."""
    return {
        _here(t.user_attrs["resume_from"], output_dir).resolve()
        for t in pending
        if t.user_attrs.get("resume_from")
    }


def chain_best_checkpoints(
    pending: list[FrozenTrial], trials: list[FrozenTrial], output_dir: str | Path | None = None
) -> set[Path]:
    """The best checkpoints of the trials a WAITING or RUNNING retry descends from, however many retries back. A retry
    resumed from its predecessor's last checkpoint may end with its best still at the predecessor's best step (it
    resumed at max_steps, or trained on without beating it): deleted before it ended, the study's best trial had no
    model to export (chaos scenario retry-exception-preempt, 2 runs in 15)."""
    by_number = {t.number: t for t in trials}
    bests = (
        before.user_attrs.get("best_checkpoint")
        for trial in pending
        for before in ancestors(trial, by_number)
    )
    return {_here(best, output_dir).resolve() for best in bests if best}


def _here(path: str, output_dir: str | Path | None) -> Path:
    return remote.localize(path, output_dir) if output_dir is not None else Path(path)


def awaiting_requeue(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    """Trials just failed with `requeued: true` whose retry another process has not enqueued yet (hpo.storage.retry fails a
    trial, then enqueues it): their checkpoints and resume point are about to be needed."""
    retried = {t.user_attrs.get("requeued_from_trial") for t in trials}
    return [
        t
        for t in trials
        if t.state == TrialState.FAIL and t.user_attrs.get("requeued") and t.number not in retried
    ]


def after_trial(spec: StudySpec, study: optuna.Study) -> list[Path]:
    """Housekeeping after any trial ends, wherever it ran: bound the disk by `study.keep_checkpoints`."""
    return enforce_keep_checkpoints(study, spec, spec.study.keep_checkpoints.top_k)


def enforce_keep_checkpoints(study: optuna.Study, spec: StudySpec, top_k: int | None) -> list[Path]:
    """Delete the checkpoints the policy does not keep; returns what was deleted. `top_k=None` keeps everything."""
    if top_k is None:
        return []
    # The trials first, the store's listing after: a trial that ends in between is RUNNING here and left alone, and
    # every trial ended here has its checkpoints (and their markers) in the listing. In the other order a trial that
    # ended between the two kept none of the checkpoints it uploaded last (chaos seeds 30510, 638642).
    trials = study.get_trials(deepcopy=False)  # read once: this runs after every trial, beside running trials
    with remote.listing(spec.output_dir):  # an object store is listed once, not a few requests per trial
        return _enforce(study, spec, top_k, trials)


def _enforce(study: optuna.Study, spec: StudySpec, top_k: int, trials: list[FrozenTrial]) -> list[Path]:
    top = {t.number for t in top_trials(study, top_k, trials)}
    pending = [t for t in trials if t.state in (TrialState.WAITING, TrialState.RUNNING)]
    pending += awaiting_requeue(trials)
    pending_retries = {t.user_attrs.get("requeued_from_trial") for t in pending}
    pending_retries |= {t.number for t in pending if t.state == TrialState.FAIL}
    output_dir = spec.output_dir
    # What a queued or running retry needs: the checkpoint it resumes from, and its ancestors' best ones
    needed = pending_resume_points(pending, output_dir) | chain_best_checkpoints(pending, trials, output_dir)
    # Each top trial's kept checkpoint, wherever it lies: a retry's best may be in its predecessor's folder.
    kept = {
        keep.resolve()
        for trial in trials
        if trial.number in top
        and (keep := kept_checkpoint(trial, trial_run_dir(trial, output_dir), output_dir))
    }
    deleted: list[Path] = []
    for trial in trials:
        if trial.state in (TrialState.RUNNING, TrialState.WAITING) or trial.number in pending_retries:
            continue
        run_dir = trial_run_dir(
            trial, spec.output_dir
        )  # never a folder outside the study's, whatever the storage says
        for checkpoint in checkpoints_in(run_dir, output_dir):
            if checkpoint.resolve() in needed or checkpoint.resolve() in kept:
                continue  # a queued or running retry needs it, or a top trial keeps it
            remote.remove(checkpoint, output_dir)  # here, and in the object store behind a URL output folder
            deleted.append(checkpoint)
    return deleted
