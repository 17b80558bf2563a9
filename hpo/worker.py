"""The worker loop: one process per slot, started by `hpo.scheduler` (for `hpo run` and `hpo worker`).

    open the study on a storage with heartbeats          (a worker that dies stops beating; see hpo.requeue)
    import torch and the trial code once
    loop:
        fail trials whose heartbeat stopped, queue them again
        under the study's claim lock: if n_trials is not used up, ask (queued retries come first)
        sample the parameters here, so every rank and every retry sees the same ones
        fork the trial's process(es); beat while they run; pass SIGTERM on as "checkpoint and stop"
        tell: the outcome; or FAIL + queue again when crashed (resuming from its checkpoint) or interrupted

Started as `python -m hpo.worker` with a pickled `WorkerConfig` on stdin. A SIGTERM asks it to stop (its trial saves a
checkpoint and is queued again); a second one kills the trial at once.
"""

from __future__ import annotations

import gc
import logging
import os
import pickle
import signal
import socket
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from hpo.requeue import RetryPolicy, fail_running_trial, fail_stale_trials
from hpo.slots import Slot
from hpo.storage import claim_lock, create_storage
from hpo.worker_child import ChildResult, TrialJob, die_with_parent, run_trial_processes, write_status

logger = logging.getLogger(__name__)
WAIT = "wait"  # nothing to claim now, but a running trial may still crash and be queued again
POLL_S = 0.5


@dataclass
class WorkerConfig:
    spec: Any
    storage_url: str
    slot: Slot
    n_trials: int | None
    deadline: float | None  # unix time after which no trial starts
    worker_index: int = 0
    status_dir: Path | None = None
    parent_pid: int | None = None

    @property
    def resources(self) -> Any:
        return getattr(self.spec, "resources", None)

    def resource(self, name: str, default: Any) -> Any:
        value = getattr(self.resources, name, None)
        return default if value is None else value


class StopRequests:
    """SIGTERM/SIGINT count up: 1 = checkpoint and stop, 2 = stop at once."""

    def __init__(self) -> None:
        self.level = 0

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.level += 1


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


# ---- opening ----------------------------------------------------------------------------------------------------
def open_worker_study(config: WorkerConfig) -> optuna.Study:
    """The study on a storage with this worker's heartbeat; the sampler seeded apart from other workers'."""
    from hpo.study import build_pruner, build_sampler

    storage = create_storage(
        config.storage_url,
        heartbeat_interval=config.resource("heartbeat_interval", 10),
        grace_period=config.resource("grace_period", 60),
    )
    existing = len(
        storage.get_all_trials(storage.get_study_id_from_name(config.spec.study.name), deepcopy=False)
    )
    return optuna.load_study(
        study_name=config.spec.study.name,
        storage=storage,
        sampler=build_sampler(config.spec, seed_offset=config.worker_index * 100_003 + existing),
        pruner=build_pruner(config.spec),
    )


def retry_policy(config: WorkerConfig) -> RetryPolicy:
    return RetryPolicy(config.resource("max_retries", 2), str(config.spec.output_dir))


# ---- claiming -------------------------------------------------------------------------------------------------------
def claim_trial(
    study: optuna.Study, n_trials: int | None, lock_dir: Path, policy: RetryPolicy | None = None
) -> optuna.Trial | str | None:
    """A trial to run, WAIT, or None when the study has nothing left for this worker."""
    from hpo.study import remaining_trials

    if policy is not None:
        for number in fail_stale_trials(study, policy):
            logger.warning("trial %d: its worker stopped beating; queued again", number)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Optuna warns that heartbeats are meant for Study.optimize
        with claim_lock(study._storage, study.study_name, lock_dir):  # noqa: SLF001
            remaining = remaining_trials(study, n_trials)
            if remaining is None or remaining > 0:
                trial = study.ask()
                study._storage.record_heartbeat(trial._trial_id)  # noqa: SLF001 - beat before anything can fail
                return trial
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    return WAIT if any("worker" in t.user_attrs for t in running) else None


# ---- running one trial ------------------------------------------------------------------------------------------
def run_one(
    study: optuna.Study, trial: optuna.Trial, config: WorkerConfig, stop: StopRequests, claimed_at: float
) -> ChildResult:
    from hpo.space import sample_params

    slot = config.slot
    for key, value in {
        "worker": worker_identity(),
        "slot": slot.label,
        "devices": list(slot.devices),
        "ranks": slot.ranks,
    }.items():
        trial.set_user_attr(key, value)
    params = sample_params(trial, config.spec.search_space)
    resume_from = _resume_from(study, trial, config)
    job = TrialJob(
        spec=config.spec,
        study=study,
        trial=trial,
        params=dict(trial.params),
        resume_from=resume_from,
        ranks=slot.ranks,
        threads=slot.threads,
        worker_pid=os.getpid(),
        status_file=status_file(config),
        metric=_first_metric(config.spec),
        status_base={"slot": slot.label, "trial": trial.number, "params": params, "started": time.time()},
    )
    if job.status_file is not None:
        write_status(job.status_file, {**job.status_base, "state": "starting"})
    from hpo.storage import dispose_connections

    dispose_connections(study._storage)  # noqa: SLF001 - no database socket may be shared with the forks
    interval = float(config.resource("heartbeat_interval", 10))
    beat = lambda: study._storage.record_heartbeat(trial._trial_id)  # noqa: E731, SLF001
    result = run_trial_processes(job, beat, lambda: stop.level, interval)
    if result.first_step_at is not None and result.outcome is not None:
        # From ask to the first training step: fork, imports already warm, data, model, Trainer set-up.
        result.outcome.user_attrs["startup_s"] = round(result.first_step_at - claimed_at, 3)
    return result


def _resume_from(study: optuna.Study, trial: optuna.Trial, config: WorkerConfig) -> str | None:
    """A queued retry resumes from the checkpoint its predecessor left; the trial records which trial it continues."""
    path = trial.user_attrs.get("resume_from")
    previous = trial.user_attrs.get("requeued_from_trial")
    if not path or not Path(path).is_dir():
        return None
    trial.set_user_attr("resumed_from_trial", previous)
    # The store callback records the one "resumed" event, at the first step the restored run takes.
    return str(path)


def finish(study: optuna.Study, trial: optuna.Trial, result: ChildResult, config: WorkerConfig) -> str:
    """Record how the trial ended. Returns a word for the log: the state, or 'crashed' / 'interrupted'."""
    from hpo.trial import record_outcome

    policy = retry_policy(config)
    outcome = result.outcome
    pruned = outcome is not None and outcome.state == TrialState.PRUNED
    if result.interrupted_at is not None and not pruned:
        step = result.interrupted_at
        reason = "interrupted" + (f" at step {step}" if step >= 0 else " before training started")
        attrs = {"interrupted": True, "interrupted_step": step}
        if outcome is not None:
            attrs.update({k: v for k, v in outcome.user_attrs.items() if k not in ("error",)})
        fail_running_trial(study, trial._trial_id, reason, policy, counts_as_retry=False, extra_attrs=attrs)
        _event(config, trial.number, "interrupted", f"{reason}; queued to resume", step=step)
        return "interrupted"
    if (
        outcome is not None
        and outcome.state == TrialState.FAIL
        and config.resource("retry_on_exception", False)
    ):
        reason = f"failed: {outcome.error}"
        outcome.user_attrs.pop("error", None)
        if (
            fail_running_trial(
                study, trial._trial_id, reason, policy, counts_as_retry=True, extra_attrs=outcome.user_attrs
            )
            is not None
        ):
            _event(config, trial.number, "retried", f"{outcome.error}; queued again (retry_on_exception)")
        return "failed"
    if result.crashed:
        reason = result.describe_crash()
        retry = fail_running_trial(
            study, trial._trial_id, reason, policy, counts_as_retry=True, extra_attrs={"crashed": True}
        )
        _event(config, trial.number, "failed", reason)
        if retry is not None:
            _event(config, trial.number, "retried", f"{reason}; queued again to resume from its checkpoint")
        return "crashed"
    try:
        record_outcome(study, trial, outcome)
    except (optuna.exceptions.UpdateFinishedTrialError, RuntimeError, ValueError) as error:
        logger.warning("trial %d: could not record its outcome: %s", trial.number, error)
        return "lost"
    return outcome.state.name.lower()


def _event(config: WorkerConfig, number: int, kind: str, message: str, **data: Any) -> None:
    try:
        from hpo.tracking.events import record_event
    except ImportError:
        return
    record_event(config.spec, f"{config.spec.study.name}/trial-{number}", kind, message, data)


def _first_metric(spec: Any) -> str | None:
    from hpo.objectives import study_metrics

    metrics = study_metrics(spec.study)
    return metrics[0] if metrics else None


def status_file(config: WorkerConfig) -> Path | None:
    if config.status_dir is None:
        return None
    config.status_dir.mkdir(parents=True, exist_ok=True)
    return config.status_dir / f"slot-{config.slot.index}.json"


# ---- the loop -----------------------------------------------------------------------------------------------------
def run_worker(config: WorkerConfig) -> int:
    stop = StopRequests()
    stop.install()
    die_with_parent(config.parent_pid)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = open_worker_study(config)
    warm_up()
    gc.freeze()  # the warm imports: forked trials neither copy them on write nor walk them in gc.collect()
    lock_dir = Path(config.spec.output_dir)
    status = status_file(config)
    while stop.level == 0 and (config.deadline is None or time.time() < config.deadline):
        claimed_at = time.time()
        claimed = claim_trial(study, config.n_trials, lock_dir, retry_policy(config))
        if claimed is None:
            break
        if claimed == WAIT:
            _write_idle(status, config, "waiting")
            time.sleep(POLL_S)
            continue
        try:
            result = run_one(study, claimed, config, stop, claimed_at)
        except Exception as error:  # noqa: BLE001 - e.g. a search space the sampler rejects: fail this trial only
            logger.exception("trial %d could not start", claimed.number)
            claimed.set_user_attr("error", f"{type(error).__name__}: {error}")
            study.tell(claimed, state=TrialState.FAIL)
            continue
        finish(study, claimed, result, config)
        _after_trial(config, study)
        _write_idle(status, config, "idle")
    _write_idle(status, config, "stopped")
    return 0


def warm_up() -> None:
    """Import here, once, what every trial would otherwise import after its fork: torch, the trial code, and what
    torch loads lazily on first use (building an optimizer imports torch._dynamo: seconds). No tensor work is done,
    so no thread pool exists yet when the trials are forked."""
    import safetensors.torch  # noqa: F401
    import torch

    import hpo.trial  # noqa: F401
    import trainer.trainer  # noqa: F401

    torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))])


def _after_trial(config: WorkerConfig, study: optuna.Study) -> None:
    from hpo.study import after_trial

    try:
        after_trial(config.spec, study)
    except Exception as error:  # noqa: BLE001 - housekeeping must not end the worker
        logger.warning("after-trial housekeeping failed: %s", error)


def _write_idle(path: Path | None, config: WorkerConfig, state: str) -> None:
    if path is not None:
        write_status(
            path, {"slot": config.slot.label, "state": state, "updated": time.time(), "pid": os.getpid()}
        )


def main() -> int:
    config: WorkerConfig = pickle.load(sys.stdin.buffer)  # from our own scheduler process, never from a user
    logging.basicConfig(level=logging.WARNING, format="worker %(process)d: %(message)s")
    return run_worker(config)


if __name__ == "__main__":
    sys.exit(main())
