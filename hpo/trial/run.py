"""One trial of a study: sample the parameters, build a fresh Trainer, train, score, and say how it ended.

Isolation is the point. Each trial gets a new TrainingArguments object (the spec's defaults are never mutated), a seed
set right before `model_init`, new callback instances (an early-stopping counter starts at zero), its own output folder
`trial-<number>/` and its own tracker runs. `run_trial` never calls `study.tell`: the caller (the in-process executor of
`hpo.study.manager`, or a scheduler worker) records the outcome with `record_outcome`, so a trial can run in any process.
"""

from __future__ import annotations

import gc
import logging
import math
import os
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
import torch
from optuna.trial import TrialState

from hpo.spec import StudySpec
from hpo.storage import remote
from hpo.storage.database import is_storage_outage
from hpo.storage.outage import is_unreachable, no_waiting
from hpo.storage.retry import process_identity
from hpo.storage.study_db import set_user_attrs, storage_of, trial_id
from hpo.tracking.callbacks import build_tracking_callbacks, finish_tracking
from hpo.tracking.footprint import footprint
from hpo.tracking.run_info import RunInfo, origin_attrs
from hpo.trial.adapter import wrap_model
from hpo.trial.callbacks import TrialIdentityCallback
from hpo.trial.oom import FIX as OOM_FIX
from hpo.trial.oom import describe_oom
from hpo.trial.pause import find_pause
from hpo.trial.pruning import ObjectiveTracker, OptunaPruningCallback
from hpo.trial.scoring import trial_values
from hpo.trial.space import sample_params
from hpo.trial.upload import upload_callbacks
from trainer import (
    PrinterCallback,
    ProgressCallback,
    Trainer,
    TrainerCallback,
    TrainerState,
    TrainingArguments,
    set_seed,
)

logger = logging.getLogger(__name__)


@dataclass
class TrialOutcome:
    state: TrialState
    values: list[float] | None
    pruned_step: int | None
    error: str | None
    user_attrs: dict[str, Any] = field(default_factory=dict)
    # (step, value) reports the storage did not take while the trial trained (an outage): its worker writes them,
    # in order, before it records the outcome (hpo.trial.pruning).
    kept_reports: list[tuple[int, float]] = field(default_factory=list)


def trial_dir(spec: StudySpec, number: int) -> Path:
    return Path(spec.trial_dir(number))


def run_trial(
    spec: StudySpec,
    study: optuna.Study,
    trial: optuna.Trial,
    *,
    resume_from: str | None = None,
    extra_callbacks: Sequence[TrainerCallback] = (),
    gpu_shared: Callable[[], int] | None = None,
    params: dict[str, Any] | None = None,
    release_memory: bool = True,
    record_start: bool = True,
) -> TrialOutcome:
    """Train one trial and return its outcome; an exception inside the trial becomes a FAIL outcome, never a raise.

    `gpu_shared()`: how many other trials share this trial's GPU (asked when it runs out of GPU memory; a scheduler
    that packs trials passes it). Out of memory alone, the trial fails with one line (`hpo.trial.oom`); beside others
    its outcome says so (`oom_shared_with`), its runs end with "out_of_memory", and the caller queues it again.
    `params` replaces the trial's sampled parameters (a PBT member trains with the values it copied and explored).
    `release_memory=False` skips the full `gc.collect()` after the trial (0.1-0.8 s): for a trial process that ends
    right after, where the operating system takes back everything at once. `record_start=False`: the caller stored the
    trial's run_dir, threads and resume point before this process started (a scheduler's worker, while it forks), so
    training starts without a database write; this process's identity comes with the outcome."""
    started = time.time()
    # A trial resumed after a pause (an ASHA promotion, a PBT interval) adds this run to its earlier ones: its duration
    # is all the training it did, not its last piece (the attribute comes with the trial from the database).
    earlier = float(trial.user_attrs.get("duration_s") or 0.0) if resume_from else 0.0
    run_dir = trial_dir(spec, trial.number)
    attrs: dict[str, Any] = {
        "run_dir": str(run_dir),
        **process_identity(),
        "threads": torch.get_num_threads(),
    }
    if resume_from:
        attrs["resume_from"] = str(resume_from)
    if record_start:
        _set_attrs(study, trial, attrs)
    tracking: list[TrainerCallback] = []
    try:
        outcome = _train_and_score(spec, trial, run_dir, resume_from, list(extra_callbacks), tracking, params)
    except Exception as error:  # noqa: BLE001 - a failing trial must not stop the study
        outcome = _failure(error, gpu_shared)
    outcome.user_attrs = {
        **attrs,
        **outcome.user_attrs,
        "duration_s": round(earlier + time.time() - started, 3),
    }
    outcome.user_attrs["error"] = outcome.error
    outcome.user_attrs["pruned_step"] = outcome.pruned_step
    shared_oom = bool(outcome.user_attrs.get("oom_shared_with"))
    _finish_tracking(tracking, outcome, status="out_of_memory" if shared_oom else None)
    if release_memory:
        _release_memory()
    return outcome


def _failure(error: Exception, gpu_shared: Callable[[], int] | None) -> TrialOutcome:
    """The FAIL outcome of a trial that raised. CUDA out of memory is told in one line, without PyTorch's paragraph
    (in the error and the store once, not again in a traceback attribute), and says whether the GPU was shared."""
    oom = describe_oom(error)
    if oom is None:
        message = f"{type(error).__name__}: {error}"
        attrs = {"traceback": traceback.format_exc()}
        if is_storage_outage(error):  # the caller queues it again: the database failed, not the configuration
            attrs["storage_outage"] = True
        return TrialOutcome(TrialState.FAIL, None, None, message, attrs)
    attrs: dict[str, Any] = {"cuda_oom": True}
    others = gpu_shared() if gpu_shared is not None else 0
    if others:
        attrs["oom_shared_with"] = others
        oom = f"{oom.removesuffix('; ' + OOM_FIX)}, while sharing the GPU with {others} other trial(s): queued again"
    return TrialOutcome(TrialState.FAIL, None, None, oom, attrs)


def _train_and_score(
    spec: StudySpec,
    trial: optuna.Trial,
    run_dir: Path,
    resume_from: str | None,
    extra: list[TrainerCallback],
    tracking: list[TrainerCallback],
    given: dict[str, Any] | None = None,
) -> TrialOutcome:
    task = spec.task.resolve()
    params = sample_params(trial, spec.search_space) if given is None else dict(given)
    training, model_params = spec.split_params(params)
    args = trial_arguments(spec, run_dir, trial.number, training)
    # The trackers first: a data() that raises still ends this trial's store run as failed (a resumed PBT member's
    # run stayed "paused" while the trial was FAIL; found by tests/chaos/campaign.py).
    tracking.extend(_tracking_callbacks(spec, trial, run_dir, params))
    train_dataset, eval_dataset = task.data(dict(model_params))

    def model_init():
        # The seed right before the model is built: every trial starts from the same initialisation for its params.
        set_seed(args.seed)
        model = task.model_init(dict(model_params))
        return model if spec.peft is None else wrap_model(model, spec.peft, spec.peft_params(params))

    tracker = ObjectiveTracker()
    pruning = _pruning_callback(spec, trial)
    callbacks = [TrialIdentityCallback(f"trial-{trial.number}", params), tracker]
    callbacks += [pruning] if pruning else []
    callbacks += tracking + _file_callbacks(spec)
    earlier = trial.user_attrs.get("uploaded") if isinstance(trial, optuna.Trial) else None
    # Uploaded before the scheduler's callbacks (`extra`) act on the save: a PBT member that waits in place at its
    # interval must already be in the object store, for a member on another machine may copy it meanwhile.
    uploads = upload_callbacks(spec.output_dir, lambda total: _record_upload(trial, total), earlier)
    callbacks += uploads
    callbacks += extra
    set_seed(args.seed)
    trainer = Trainer(
        model_init=model_init,
        args=args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        data_collator=task.collator,
        compute_metrics=task.compute_metrics,
        callbacks=callbacks,
    )
    # A trial's logs go to the trackers; printed, they would land between the study table's rows (--in-process) or
    # fill the worker's log (forked): neither the log dicts (disable_tqdm) nor a progress bar is shown for a trial.
    for console_output in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(console_output)
    trainer.train(resume_from_checkpoint=resume_from)
    pause = find_pause(extra)
    if pause is not None:  # stopped at a pause point with a checkpoint: a scheduler continues it later
        outcome = paused_outcome(pause.paused_step, pause.paused_value, run_dir, pause.decided_at)
        outcome.user_attrs["best_checkpoint"] = paused_best_checkpoint(
            spec, tracker, chain_dirs(run_dir, resume_from), trainer.state
        )
        return _with_kept_reports(outcome, pruning, uploads)
    if (
        not tracker.evaluations
        and eval_dataset is not None
        and (pruning is None or pruning.pruned_step is None)
    ):
        trainer.evaluate()  # evaluation was off during training: score the final model once
    outcome = score_trial(spec, tracker, pruning, chain_dirs(run_dir, resume_from), trainer.state)
    outcome.user_attrs.update(memory_attrs(trainer.state.peak_memory))
    outcome.user_attrs.update(
        footprint(trainer.model, trainer.state, run_dir)
    )  # trainable params, checkpoint size
    del trainer
    return _with_kept_reports(outcome, pruning, uploads)


def _with_kept_reports(
    outcome: TrialOutcome, pruning: OptunaPruningCallback | None, uploads: list[TrainerCallback]
) -> TrialOutcome:
    """What an outage kept from the storage travels with the outcome: the reports (how many were kept is recorded)
    and the total of uploaded checkpoints."""
    for upload in uploads:
        if upload.total["checkpoints"]:  # type: ignore[attr-defined]
            outcome.user_attrs["uploaded"] = dict(upload.total)  # type: ignore[attr-defined]
    if pruning is not None and pruning.kept_total:
        outcome.kept_reports = list(pruning.kept)
        outcome.user_attrs["reports_kept"] = pruning.kept_total
    return outcome


def _record_upload(trial: optuna.Trial, total: dict[str, Any]) -> None:
    """The trial's running total of uploaded checkpoints (a FixedTrial of another rank has no storage). Training does
    not wait for the storage to take it: the total counts only uploads that succeeded, the next one writes a newer
    total, and the trial's outcome carries the last (`uploaded` in its attributes)."""
    if not isinstance(trial, optuna.Trial):
        return
    try:
        with no_waiting():
            trial.set_user_attr("uploaded", total)
    except Exception as error:
        if not is_unreachable(error):
            raise


def memory_attrs(peaks: dict[str, int | None]) -> dict[str, int]:
    """The trial's memory peaks in bytes, from the Trainer's run peaks: `peak_gpu_memory` (what PyTorch's allocator
    reserved at most on the GPU; the scheduler's GPU gate expects the next trial from it) and `peak_rss`."""
    attrs = {}
    if peaks.get("gpu_reserved") is not None:
        attrs["peak_gpu_memory"] = int(peaks["gpu_reserved"])
    if peaks.get("cpu_rss") is not None:
        attrs["peak_rss"] = int(peaks["cpu_rss"])
    return attrs


def trial_arguments(
    spec: StudySpec, run_dir: Path, number: int, training: dict[str, Any]
) -> TrainingArguments:
    """A fresh TrainingArguments for this trial: the spec's defaults, the sampled values, the trial's folder.

    With one objective scored by its best evaluation, the Trainer is told which metric is best (unless the study file
    says otherwise), so that its `best_model_checkpoint` and checkpoint rotation keep that checkpoint."""
    overrides: dict[str, Any] = {"run_name": f"trial-{number}", **training}
    metrics, directions = spec.study.metrics or [], spec.study.directions or []
    defaults = spec.training
    if (
        len(metrics) == 1
        and "metric_for_best_model" not in defaults
        and "metric_for_best_model" not in training
    ):
        overrides["metric_for_best_model"] = metrics[0]
        overrides["greater_is_better"] = directions[0] == "maximize"
    strategy = _multi_rank_strategy(spec, training)
    if strategy is not None:
        overrides["strategy"] = strategy
    return spec.training_arguments(str(run_dir), **overrides)


def _multi_rank_strategy(spec: StudySpec, training: dict[str, Any]) -> str | None:
    """In a rank of a multi-rank trial (the worker set WORLD_SIZE), `resources.strategy` unless training says."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or "strategy" in training:
        return None
    return spec.trial_strategy()


def _pruning_callback(spec: StudySpec, trial: optuna.Trial) -> OptunaPruningCallback | None:
    pruner = spec.study.pruner
    prunes = spec.stops_at_rungs() or (pruner is not None and pruner.enabled)
    if not prunes or spec.study.is_multi_objective:
        return None
    return OptunaPruningCallback(trial, metric=(spec.study.metrics or ["eval_loss"])[0])


def _file_callbacks(spec: StudySpec) -> list[TrainerCallback]:
    """The study file's `callbacks:`, built anew for this trial (an early-stopping counter starts at zero)."""
    return spec.build_callbacks()


def _tracking_callbacks(
    spec: StudySpec, trial: optuna.Trial | optuna.trial.FixedTrial, run_dir: Path, params: dict[str, Any]
) -> list[TrainerCallback]:
    """Fresh store/wandb callbacks for this trial; only the process that owns the trial (rank 0) records it."""
    if os.environ.get("RANK", "0") != "0":
        return []
    attrs = trial.user_attrs
    run = RunInfo(
        kind="trial",
        study_name=spec.study.name,
        trial_number=trial.number,
        params=dict(params),
        output_dir=str(run_dir),
        slot=attrs.get("slot"),
        devices=attrs.get("devices"),
        # A retry records "retried" once (the store callback asks the store) and marks the trial it continues.
        origin=origin_attrs(trial.user_attrs),
    )
    return list(build_tracking_callbacks(spec, run=run))


def _finish_tracking(
    callbacks: list[TrainerCallback], outcome: TrialOutcome, status: str | None = None
) -> None:
    """Close this trial's tracker runs with its result before the next trial starts. A tracker that fails costs its
    records, never the trial."""
    if not callbacks:
        return
    try:
        finish_tracking(callbacks, outcome, **({"status": status} if status else {}))
    except Exception as error:  # noqa: BLE001
        outcome.user_attrs["tracking_error"] = f"{type(error).__name__}: {error}"


def score_trial(
    spec: StudySpec,
    tracker: ObjectiveTracker,
    pruning: OptunaPruningCallback | None,
    run_dirs: list[Path],
    state: TrainerState,
) -> TrialOutcome:
    """The trial's state and values from its evaluations: best (or last) evaluation, PRUNED with its step, or FAIL."""
    metrics, directions = spec.study.metrics or [], spec.study.directions or []
    evaluations = tracker.with_history(list(state.log_history))
    values, best_step = trial_values(evaluations, metrics, directions, spec.study.objective)
    final = evaluations[-1][1] if evaluations else {}
    attrs = {
        "best_step": best_step,
        "best_checkpoint": best_checkpoint(run_dirs, best_step, state),
        "final_metrics": {k: (v if math.isfinite(v) else None) for k, v in final.items()},
        "global_step": state.global_step,
    }
    if pruning is not None and pruning.pruned_step is not None:
        value = pruning.pruned_value
        pruned_values = [value] if value is not None and math.isfinite(value) else None
        return TrialOutcome(TrialState.PRUNED, pruned_values, pruning.pruned_step, None, attrs)
    if not evaluations:
        error = "no evaluation ran: give the task an eval dataset (the objective is an evaluation metric)"
        return TrialOutcome(TrialState.FAIL, None, None, error, attrs)
    if values is None:
        missing = [m for m in metrics if m not in final]
        error = f"evaluation did not produce {', '.join(missing)}; it produced: {', '.join(sorted(final))}"
        return TrialOutcome(TrialState.FAIL, None, None, error, attrs)
    if not all(math.isfinite(v) for v in values):
        error = f"non-finite objective: {dict(zip(metrics, values, strict=True))}"
        return TrialOutcome(TrialState.FAIL, None, None, error, attrs)
    return TrialOutcome(TrialState.COMPLETE, values, None, None, attrs)


def paused_outcome(
    step: int | None, value: float | None, run_dir: Path, decided_at: float | None = None
) -> TrialOutcome:
    """A trial that stopped at a pause point (hpo.trial.pause): state WAITING, its value there, its checkpoint."""
    attrs = {
        "paused_step": step,
        "paused_checkpoint": str(run_dir / f"checkpoint-{step}"),
        "global_step": step,
        "pause_decided_at": decided_at,
    }
    return TrialOutcome(TrialState.WAITING, None if value is None else [value], None, None, attrs)


def paused_best_checkpoint(
    spec: StudySpec, tracker: ObjectiveTracker, run_dirs: list[Path], state: TrainerState
) -> str | None:
    """The checkpoint a paused trial must keep besides the one it resumes from: with `objective: best`, its best
    evaluation's, which is its value if it is promoted and completes (None otherwise)."""
    if spec.study.objective != "best":
        return None
    metrics, directions = spec.study.metrics or [], spec.study.directions or []
    evaluations = tracker.with_history(list(state.log_history))
    _, best_step = trial_values(evaluations, metrics, directions, spec.study.objective)
    return best_checkpoint(run_dirs, best_step, state)


def chain_dirs(run_dir: Path, resume_from: str | None) -> list[Path]:
    """Where this attempt's checkpoints can be: its own folder, then the one it resumed from. A retry resumes from its
    crashed predecessor's checkpoint, and its best evaluation may be from before the crash (found by tests/chaos/campaign.py:
    such a retry recorded no best checkpoint, retention deleted the predecessor's, and its model was lost)."""
    earlier = Path(resume_from).parent if resume_from else None
    return [run_dir] + ([earlier] if earlier is not None and earlier.resolve() != run_dir.resolve() else [])


def best_checkpoint(run_dirs: list[Path], best_step: int | None, state: TrainerState) -> str | None:
    """The checkpoint saved at the best evaluation's step (this trial's folder first, then the one it resumed from),
    else the Trainer's own best when it lies in one of those folders, else None. Retention keeps it wherever it is."""
    output_dir = run_dirs[
        0
    ].parent  # trial-N/ lies in the study's output folder (a mirror: hpo.storage.remote)
    if best_step is not None:
        for folder in run_dirs:
            if _saved(folder / f"checkpoint-{best_step}", output_dir):
                return str(folder / f"checkpoint-{best_step}")
    # Restored from a checkpoint another machine wrote, the Trainer's best names that machine's mirror.
    trainer_best = (
        remote.localize(state.best_model_checkpoint, output_dir) if state.best_model_checkpoint else None
    )
    folders = {folder.resolve() for folder in run_dirs}
    if trainer_best and _saved(trainer_best, output_dir) and trainer_best.parent.resolve() in folders:
        return str(trainer_best)
    return None


def _saved(checkpoint: Path, output_dir: Path) -> bool:
    """A checkpoint here, or (a URL output folder) complete in the object store."""
    return checkpoint.is_dir() or remote.exists(checkpoint, output_dir)


def record_outcome(study: optuna.Study, trial: optuna.Trial, outcome: TrialOutcome) -> None:
    """Store the kept reports and the user attributes, and tell the study how the trial ended."""
    write_kept_reports(study, trial, outcome)
    _set_attrs(study, trial, outcome.user_attrs)
    if outcome.state == TrialState.COMPLETE:
        study.tell(trial, outcome.values)
    else:
        study.tell(trial, state=outcome.state)


def write_kept_reports(study: optuna.Study, trial: optuna.Trial, outcome: TrialOutcome) -> None:
    """The reports the trial's process could not write during an outage (`kept_reports`), in order; each is an upsert on
    (trial, step), so one written again after a lost answer is still written once. The list is emptied as written."""
    kept, outcome.kept_reports = outcome.kept_reports, []
    if not kept:
        return
    storage = storage_of(study)  # by id: the trial may have been sent from another process
    try:
        for step, value in kept:
            storage.set_trial_intermediate_value(trial_id(trial), step, value)
    except optuna.exceptions.UpdateFinishedTrialError:
        return  # ended meanwhile (swept as stale): its retry reports again from its checkpoint
    logger.warning("trial %d: %d report(s) kept during an outage written", trial.number, len(kept))


def _set_attrs(
    study: optuna.Study, trial: optuna.Trial | optuna.trial.FixedTrial, attrs: dict[str, Any]
) -> None:
    """All in one transaction for a stored trial; a FixedTrial (the other ranks of a distributed trial) keeps them."""
    if isinstance(trial, optuna.Trial):
        set_user_attrs(study, trial, attrs)
    else:
        for key, value in attrs.items():
            trial.set_user_attr(key, value)


def _release_memory() -> None:
    """When trials share a process (the in-process executor, hyperparameter_search), free what the last one held."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
