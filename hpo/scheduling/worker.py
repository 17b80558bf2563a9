"""The worker loop: one process per slot, started by `hpo.scheduling.pool` (for `hpo run` and `hpo worker`).

    main():                                    python -m hpo.scheduling.worker, a pickled WorkerConfig on stdin
        warm_up_ahead()                        # torch's lazy imports, done while the scheduler still checks the study
        die with the pool; SIGTERM/SIGINT count up stop requests      (StopRequests: 1 = save and stop, 2 = now)
        study = open_worker_study()            # a storage with this worker's heartbeat; sampler seeded apart
        warm_up(); gc.freeze()                 # torch, the trial code (and a data() without parameters) loaded
                                               # once, shared by every fork
        while no stop was asked and the deadline has not passed:
            on a shared GPU: wait while the GPU gate says no trial may start  (hpo.scheduling.gpu_gate)
            claim_trial():                                                          # CLAIM
                with claim_lock(study):        # one claimer at a time across processes and machines
                    fail_stale_trials()        # trials whose heartbeat stopped (a dead worker anywhere) -> queued
                                               # (not within a grace period of an outage's end)
                    if n_trials is not used up: trial = study.ask()   (queued retries come first)
                    its worker named; record_heartbeat(trial)   # so a crash from here on is found
                -> a trial | WAIT (a running trial may still be queued again) | None (nothing left: leave)
            run_one(trial):                                                         # FORK
                sample the parameters here, so every rank and every retry sees the same ones
                on a shared GPU: wait (beating) until the gate admits the trial with these parameters
                run_trial_processes(job)       # hpo.scheduling.child: fork one process per rank (on the CPU, hand
                                               # a one-rank trial to the last trial's process when it waits), then
                    every heartbeat_interval: record_heartbeat(trial)                # HEARTBEAT
                                               # (a storage outage skips a beat: hpo.scheduling.heartbeat)
                    a stop request: SIGTERM the ranks (checkpoint at the next step, then stop); a second: SIGKILL
                    a rank that dies: kill the others (no rank waits forever in a collective)
                -> ChildResult: rank 0's outcome, or the step an interrupt stopped at, or a crash
            finish(trial, result):                                                  # TELL
                the reports its process kept during an outage are written first, in order
                interrupted -> FAIL + queued again to resume (does not use up max_retries)
                CUDA out of memory beside other trials -> FAIL + queued again to run alone (does not use up
                    max_retries; not a failed trial); alone -> FAIL with one line (hpo.trial.oom)
                crashed / exception with retry_on_exception / the database failed -> FAIL + queued again from its
                    newest checkpoint
                else -> record_outcome: COMPLETE with its values, PRUNED, or FAIL with its error
            after_trial()                      # bound the disk (study.keep_checkpoints), done while the next
                                               # trial's process starts (Chores), and when the worker leaves
            write the slot's status file       # for the live table and `hpo status`

Every storage call above waits for a storage that stops answering (a database restart, a failover, SQLite locked
past its busy timeout: hpo.storage.outage), up to `storage.outage_timeout`: the claim (whole, from the claim lock),
the result, the sweeps. The HEARTBEAT alone never waits (a beat is skipped), and the trial trains on, keeping the
reports the storage cannot take; FINISH writes them, in order, before the result. After an outage no sweep judges a
trial stale for a grace period (its worker could not beat meanwhile). Past the timeout the trial is stopped as on a
first stop request (a checkpoint at its next step), the worker exits EXIT_STORAGE_UNREACHABLE and leaves the trial
RUNNING: the pool stops the other workers, `hpo run` exits 75, and the next run queues the trial again to resume.

Workers coordinate only through the Optuna storage (heartbeats, the claim lock of `hpo.storage.database`), so
`hpo worker` on other machines joins the same study the same way.
"""

from __future__ import annotations

import gc
import importlib
import logging
import os
import pickle
import signal
import socket
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import safetensors.torch  # noqa: F401 - imported once here, shared by every forked trial
import torch
from optuna.trial import FrozenTrial, TrialState

from hpo.errors import StoppedWaiting, StorageUnreachable
from hpo.scheduling import early_interrupt
from hpo.scheduling.child import (
    ChildResult,
    TrialJob,
    die_with_parent,
    reap_exited,
    release_warm,
    run_trial_processes,
)
from hpo.scheduling.gpu_gate import OOM_RETRY_ATTR, GpuGate, MemoryReader, default_reader, gate_dir
from hpo.scheduling.heartbeat import TrialHeartbeat
from hpo.scheduling.pbt import PbtPlan, claim_pbt_work, member_setup
from hpo.scheduling.pbt_time_up import end_paused_members
from hpo.scheduling.promotion import AshaPlan, claim_work, drop_older_checkpoints, end_hopeless
from hpo.scheduling.slots import Slot
from hpo.spec import StudySpec
from hpo.storage import outage, remote
from hpo.storage.database import claim_lock
from hpo.storage.pause import pause_trial
from hpo.storage.retention import after_trial
from hpo.storage.retry import (
    RetryPolicy,
    fail_running_trial,
    fail_stale_trials,
    fail_unbeaten_trials,
    process_identity,
    requeue_lost_retries,
    retry_pending,
)
from hpo.storage.study_db import (
    heartbeat_grace,
    open_worker_study,
    record_heartbeat,
    release_connections,
    remaining_trials,
    set_user_attrs,
    storage_of,
    trial_id,
    update_trial,
)
from hpo.tracking import environment
from hpo.tracking.events import KeptOpenEvents, store_location
from hpo.tracking.run_info import RunInfo, origin_attrs
from hpo.tracking.store import trial_run_id
from hpo.tracking.store_callback import record_origin
from hpo.trial.callbacks import write_status
from hpo.trial.run import record_outcome, trial_dir, write_kept_reports
from hpo.trial.space import sample_params
from trainer import prepare_for_fork

logger = logging.getLogger(__name__)
WAIT = "wait"  # nothing to claim now, but a running trial may still crash and be queued again
POLL_S = 0.5
# Nothing to claim yet: ask again soon, then less and less often. In a study that pauses trials, work usually
# appears within a training segment (a partner pauses, an interval's scores complete); a flat half-second wait
# left a slot idle for most of a segment (bench/pause/costs.py pbt), while a claim costs a few milliseconds.
FIRST_WAIT_S = 0.02
SWEEP_EVERY_S = 1.0
# A worker that leaves because the storage did not answer for storage.outage_timeout (its pool stops the others).
EXIT_STORAGE_UNREACHABLE = StorageUnreachable.exit_code


class Backoff:
    """Waits that double from `first` to `most`; `reset()` after a wait that ended in work."""

    def __init__(self, first: float = FIRST_WAIT_S, most: float = POLL_S) -> None:
        self.first, self.most, self.next = first, most, first

    def wait(self) -> None:
        time.sleep(self.next)
        self.next = min(self.most, self.next * 2)

    def reset(self) -> None:
        self.next = self.first


class Every:
    """Due at most once per `seconds` (first call: due)."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.last = seconds, float("-inf")

    def due(self) -> bool:
        now = time.monotonic()
        if now - self.last < self.seconds:
            return False
        self.last = now
        return True


@dataclass
class WorkerConfig:
    spec: StudySpec
    storage_url: str
    slot: Slot
    n_trials: int | None
    deadline: float | None  # unix time after which no trial starts
    worker_index: int = 0
    status_dir: Path | None = None
    parent_pid: int | None = None
    # GPU index -> NVML-shaped figures, for a shared GPU; None: HPO_GPU_MEMORY_READER, else NVML.
    gpu_memory: MemoryReader | None = None
    started_before: int | None = (
        None  # trials started before this run: the seed offset (study_db.open_worker_study)
    )


class StopRequests:
    """SIGTERM/SIGINT count up: 1 = checkpoint and stop, 2 = stop at once.

    A signal within `same_stop_s` of the one before is the same stop: a job scheduler (SLURM's scancel, its time
    limit) signals every process of the job at once, so this worker hears SLURM's SIGTERM and the one its pool
    forwards a moment later; counted twice, it would kill its trial instead of letting it save. (A second Ctrl-C never
    comes this way: the pool answers it with SIGKILL.)"""

    same_stop_s = 5.0

    def __init__(self) -> None:
        self.level = 0
        self.last_at = float("-inf")

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        if early_interrupt.was_swallowed():
            self._on_signal(signal.SIGINT, None)

    def _on_signal(self, signum: int, frame: Any) -> None:
        now = time.monotonic()
        if now - self.last_at >= self.same_stop_s:
            self.level += 1
        self.last_at = now


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def retry_policy(config: WorkerConfig) -> RetryPolicy:
    return RetryPolicy.of(config.spec)


# ---- claiming -------------------------------------------------------------------------------------------------------
def claim_trial(
    study: optuna.Study,
    n_trials: int | None,
    lock_dir: Path,
    policy: RetryPolicy | None = None,
    asha: AshaPlan | None = None,
    pbt: PbtPlan | None = None,
) -> optuna.Trial | str | None:
    """A trial to run, WAIT, or None when the study has nothing left for this worker. With `asha` the next piece of
    work is a queued retry, a promotion or a new configuration (hpo.scheduling.promotion); with `pbt`, a retry, a
    member to resume (after its interval's decisions) or a new member (hpo.scheduling.pbt)."""
    if policy is not None and outage.clock.settling(_grace(study)):
        policy = (
            None  # no heartbeat could be written during the outage: give every worker a grace period to beat
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Optuna warns that heartbeats are meant for Study.optimize
        with claim_lock(storage_of(study), study.study_name, lock_dir):
            # Under the lock: a stale trial's FAIL and its retry's enqueue are two writes, and the repair of a retry
            # never queued (below) between them queued a second retry (chaos seed 30510, two stopped workers).
            for number in fail_stale_trials(study, policy) if policy is not None else []:
                logger.warning("trial %d: its worker stopped beating; queued again", number)
            # Under the lock, where no live claimer is between creating a trial and its first beat.
            for number in fail_unbeaten_trials(study, policy) if policy is not None else []:
                logger.warning("trial %d: its claimer died before its first heartbeat; queued again", number)
            for number in requeue_lost_retries(study, policy) if policy is not None else []:
                logger.warning("trial %d: failed, but its retry was never queued; queued now", number)
            if asha is not None or pbt is not None:
                owner = {"worker": worker_identity()}
                claimed = (
                    claim_work(study, asha, n_trials, owner)
                    if asha is not None
                    else claim_pbt_work(study, pbt, owner)  # type: ignore[arg-type]
                )
                if claimed is not None:
                    record_heartbeat(study, claimed)
                    return claimed
                remaining = 0
            else:
                remaining = remaining_trials(study, n_trials)
            if remaining is None or remaining > 0:
                trial = study.ask()
                # An owner from the first moment, as a claimed ASHA or PBT trial has: should this worker die before
                # its trial's process starts, `hpo run` queues the trial again at once (hpo.storage.retry.owner_gone)
                # and the other workers wait for it rather than leave it RUNNING.
                set_user_attrs(study, trial, {"worker": worker_identity()})
                record_heartbeat(study, trial)  # beat before anything can fail
                return trial
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    return WAIT if any("worker" in t.user_attrs for t in running) or retry_pending(study) else None


def _grace(study: optuna.Study) -> float:
    return heartbeat_grace(study) or 0.0


# ---- sharing a GPU ------------------------------------------------------------------------------------------------
def make_gate(config: WorkerConfig) -> GpuGate | None:
    """The GPU gate of a slot that shares its GPU with other slots; None for a GPU of its own, or the CPU."""
    slot = config.slot
    if not slot.devices or slot.packing == 1:
        return None
    reader = config.gpu_memory or default_reader()
    gpu = slot.devices[0]
    directory = gate_dir(config.spec.output_dir, gpu)
    return GpuGate(
        directory, gpu, slot.index, slot.packing, reader, slot.threads, status_file=status_file(config)
    )


def wait_for_room(
    gate: GpuGate,
    study: optuna.Study,
    trial: optuna.Trial,
    params: dict[str, Any],
    stop: StopRequests,
    status: Path | None,
    config: WorkerConfig,
) -> bool:
    """Until the gate admits the trial, keep its heartbeat and show why it waits. False: a stop was asked first."""
    alone = bool(trial.user_attrs.get(OOM_RETRY_ATTR))
    interval = float(config.spec.resources.heartbeat_interval)
    beat = TrialHeartbeat(study, trial)
    last_beat = time.monotonic()
    while True:
        decision = gate.admit(study, trial.number, params, alone=alone)
        if decision.start:
            trial.set_user_attr("gpu_admission", decision.reason)
            trial.set_user_attr("gpu_admitted_at", time.time())
            return True
        if stop.level:
            return False
        _write_idle(status, config, "waiting", note=decision.reason, trial=trial.number)
        if time.monotonic() - last_beat >= interval:
            beat()
            last_beat = time.monotonic()
        time.sleep(POLL_S)


# ---- running one trial ------------------------------------------------------------------------------------------
def record_retry_origin(spec: StudySpec, study: optuna.Study, trial: optuna.Trial) -> None:
    """A queued retry records the trial it continues before its process starts: one killed before its training
    began (its store callback's first moment) left no "retried" event, and its predecessor's run "paused" or
    "running" (tests/chaos/campaign.py). The trial's own store callback finds it written and writes nothing. A predecessor
    that was itself a retry and never started a process (swept while its worker was stopped) never recorded its own:
    it is recorded here too, or its predecessor's run stays "paused" (tests/chaos/campaign.py seed 704, PBT)."""
    location = store_location(spec)
    if location is None:
        return
    number, attrs = trial.number, trial.user_attrs
    by_number: dict[int, FrozenTrial] | None = None
    while "requeued_from_trial" in (origin := origin_attrs(attrs)):
        run = RunInfo(
            kind="trial",
            study_name=spec.study.name,
            trial_number=number,
            output_dir=str(trial_dir(spec, number)),
            origin=origin,
        )
        record_origin(location, run)
        by_number = by_number or {t.number: t for t in study.get_trials(deepcopy=False)}
        before = by_number.get(int(origin["requeued_from_trial"]))
        if before is None or "pid" in before.user_attrs:
            return  # it ran: its own process or worker recorded where it came from
        number, attrs = before.number, before.user_attrs


def keeps_process_warm(spec: StudySpec, slot: Slot) -> bool:
    """Whether the trial's process stays after its result and takes the worker's next trial
    (`resources.fresh_process_per_trial`). Only a one-rank trial on the CPU: a GPU's trial process ends, so the next trial
    finds its memory given back, and a multi-rank trial's ranks rendezvous anew."""
    return not spec.resources.fresh_process_per_trial and not slot.devices and slot.ranks == 1


def run_one(
    study: optuna.Study,
    trial: optuna.Trial,
    config: WorkerConfig,
    stop: StopRequests,
    claimed_at: float,
    gate: GpuGate | None = None,
    while_starting: Callable[[], None] | None = None,
) -> ChildResult:
    """Sample the trial's parameters, fork its process(es) and wait for the outcome. `while_starting()` runs in this
    process while the trial's process starts (housekeeping left from the last trial waits on nothing)."""
    slot = config.slot
    resume_from, resume_attrs = _resume_from(trial, config.spec.output_dir)
    attrs = {
        "worker": worker_identity(),
        "slot": slot.label,
        "devices": list(slot.devices),
        "ranks": slot.ranks,
        # What the trial process would record as it starts (hpo.trial.run), written here while nothing waits on it.
        "run_dir": str(trial_dir(config.spec, trial.number)),
        "threads": slot.threads,
        **resume_attrs,
    }
    set_user_attrs(study, trial, attrs)
    record_retry_origin(config.spec, study, trial)
    params = sample_params(trial, config.spec.search_space)
    if gate is not None and not wait_for_room(gate, study, trial, params, stop, status_file(config), config):
        return ChildResult(None, interrupted_at=-1)  # stopped while waiting for the GPU: queued again
    pbt = PbtPlan.of(config.spec)
    member_params, changes = member_setup(study, trial, resume_from) if pbt is not None else (None, {})
    promoted_at = trial.user_attrs.get(
        "promoted_at_step"
    )  # set when ASHA or PBT resumed it from a pause (hpo.scheduling.promotion, hpo.scheduling.pbt)
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
        metric=(config.spec.study.metrics or [None])[0],
        status_base={"slot": slot.label, "trial": trial.number, "params": params, "started": time.time()},
        asha=AshaPlan.of(config.spec),
        lock_dir=Path(config.spec.output_dir),
        gpu_shared=(lambda: gate.others_running() or int(gate.shared)) if gate is not None else None,
        pbt=pbt,
        member_params=member_params,
        changes=changes,
        exit_in_background=not slot.devices,
        keep_warm=keeps_process_warm(config.spec, slot),
    )
    if job.status_file is not None:
        write_status(job.status_file, {**job.status_base, "state": "starting"})
    release_connections(study)  # no database socket may be shared with the forks
    interval = float(config.spec.resources.heartbeat_interval)

    def on_start(pids: list[int]) -> None:
        if gate is not None:
            gate.set_pids(pids)
        # The trial trains unsupervised until this returns: nothing here waits for a storage that does not answer
        # (the worker's attribute owns the trial meanwhile; housekeeping is done again after the next trial).
        with outage.no_waiting():
            try:
                set_user_attrs(study, trial, process_identity(pids[0]))  # rank 0's process, as it starts
            except Exception as error:
                if not outage.is_unreachable(error):
                    raise
            if while_starting is not None:
                while_starting()

    try:
        result = run_trial_processes(
            job, TrialHeartbeat(study, trial), stop_level(stop), interval, on_start=on_start
        )
    finally:
        if gate is not None:
            gate.release()
    if result.first_step_at is not None and result.outcome is not None:
        # From ask to the first training step: fork, imports already warm, data, model, Trainer set-up.
        result.outcome.user_attrs["startup_s"] = round(result.first_step_at - claimed_at, 3)
        if promoted_at is not None:  # a promotion: that start-up also restored the checkpoint
            resumes = list(trial.user_attrs.get("resumes") or [])
            entry = {"step": promoted_at, "restart_restore_s": result.outcome.user_attrs["startup_s"]}
            result.outcome.user_attrs.update(resumes=[*resumes, entry], promoted_at_step=None)
    return result


def stop_level(stop: StopRequests) -> Callable[[], int]:
    """The trial's stop level: the user's requests, or 1 (checkpoint and stop) once the storage has been unreachable
    for `storage.outage_timeout` (the heartbeats notice): the worker then leaves with EXIT_STORAGE_UNREACHABLE."""
    return lambda: max(stop.level, 1 if outage.clock.expired() else 0)


def _resume_from(trial: optuna.Trial, output_dir: str) -> tuple[str | None, dict[str, Any]]:
    """A queued retry resumes from the checkpoint its predecessor left; the trial records which trial it continues
    (the attributes returned). The store callback records the one "resumed" event, at the first restored step.
    With a URL output folder the checkpoint may have been written on another machine: it is fetched into this one's
    mirror first (hpo.storage.remote), and what that took is recorded (`fetched`: bytes, seconds, per resume)."""
    path, fetched = remote.fetch(trial.user_attrs.get("resume_from"), output_dir)
    if path is None:
        return None, {}
    attrs: dict[str, Any] = {
        "resume_from": str(path),
        "resumed_from_trial": trial.user_attrs.get("requeued_from_trial"),
    }
    if fetched is not None:
        entry = {"checkpoint": path.name, "bytes": fetched.bytes, "seconds": round(fetched.seconds, 4)}
        attrs["fetched"] = [*(trial.user_attrs.get("fetched") or []), entry]
    return str(path), attrs


def finish(study: optuna.Study, trial: optuna.Trial, result: ChildResult, config: WorkerConfig) -> str:
    """Record how the trial ended. Returns a word for the log: the state, or 'crashed' / 'interrupted'."""
    policy = retry_policy(config)
    outcome = result.outcome
    if outcome is not None:
        write_kept_reports(study, trial, outcome)  # before the result: in order, once
    pruned = outcome is not None and outcome.state == TrialState.PRUNED
    if result.interrupted_at is not None and not pruned:
        step = result.interrupted_at
        reason = "interrupted" + (f" at step {step}" if step >= 0 else " before training started")
        attrs = {"interrupted": True, "interrupted_step": step}
        if outcome is not None:
            attrs.update({k: v for k, v in outcome.user_attrs.items() if k not in ("error",)})
        fail_running_trial(study, trial_id(trial), reason, policy, counts_as_retry=False, extra_attrs=attrs)
        _event(config, trial.number, "interrupted", f"{reason}; queued to resume", step=step)
        return "interrupted"
    if outcome is not None and outcome.state == TrialState.FAIL and outcome.user_attrs.get("oom_shared_with"):
        # Not a failure of its configuration: the trials beside it took the memory. Its retry runs alone.
        attrs = {k: v for k, v in outcome.user_attrs.items() if k != "error"}
        fail_running_trial(
            study,
            trial_id(trial),
            str(outcome.error),
            policy,
            counts_as_retry=False,
            extra_attrs=attrs,
            retry_attrs={OOM_RETRY_ATTR: True},
        )
        return "out of memory"
    outage = outcome is not None and bool(outcome.user_attrs.get("storage_outage"))
    if (
        outcome is not None
        and outcome.state == TrialState.FAIL
        and (config.spec.resources.retry_on_exception or outage)
    ):
        # A database that went away mid-trial (a PostgreSQL restart) is retried whatever retry_on_exception says:
        # the configuration did not fail. It uses up a retry (max_retries), so a task whose own code raises
        # database errors is not queued for ever.
        why = "the study's database failed" if outage else "retry_on_exception"
        reason = f"failed: {outcome.error}"
        outcome.user_attrs.pop("error", None)
        queued = fail_running_trial(
            study, trial_id(trial), reason, policy, counts_as_retry=True, extra_attrs=outcome.user_attrs
        )
        if queued is not None:
            _event(config, trial.number, "retried", f"{outcome.error}; queued again ({why})")
        return "failed"
    if result.crashed or outcome is None:
        reason = result.describe_crash()
        retry = fail_running_trial(
            study, trial_id(trial), reason, policy, counts_as_retry=True, extra_attrs={"crashed": True}
        )
        _event(config, trial.number, "failed", reason)
        if retry is not None:
            _event(config, trial.number, "retried", f"{reason}; queued again to resume from its checkpoint")
        return "crashed"
    if outcome.state == TrialState.WAITING:
        return _pause(study, trial, outcome, config)
    try:
        record_outcome(study, trial, outcome)
    except (optuna.exceptions.UpdateFinishedTrialError, RuntimeError, ValueError) as error:
        logger.warning("trial %d: could not record its outcome: %s", trial.number, error)
        # Failed meanwhile: its heartbeat went stale (this worker was stopped past the grace period) and a retry was
        # queued. Its run in the store says so, not the outcome its process wrote there too late (tests/chaos/campaign.py
        # seed 308: SIGSTOP of a worker, then SIGCONT just as another worker swept it).
        _event(config, trial.number, "failed", f"its outcome came after the trial had ended: {error}")
        return "lost"
    return outcome.state.name.lower()


def _pause(study: optuna.Study, trial: optuna.Trial, outcome: Any, config: WorkerConfig) -> str:
    """The trial stopped at a rung with a checkpoint: keep that checkpoint only, and mark it paused in the database.
    Attributes first: once paused, another worker may end it (PRUNED) at any moment, and then it is read-only."""
    step = int(outcome.user_attrs["paused_step"])
    checkpoint = Path(outcome.user_attrs["paused_checkpoint"])
    value = outcome.values[0] if outcome.values else None
    decided_at = outcome.user_attrs.pop("pause_decided_at", None)
    # The piece of training that ends here, from when the trial last went RUNNING (a resume moves the trial's start
    # to its newest piece, so without this the dashboard's timeline could draw only the last piece).
    started = trial.datetime_start  # read when this worker took the trial (created, queued or resumed)
    entry: dict[str, Any] = {"step": step, "value": value, "end": round(time.time(), 3)}
    if started is not None:
        entry["start"] = round(started.timestamp(), 3)
    if decided_at is not None:  # the pause's cost: the checkpoint, the end of the process, the database
        entry["at"] = round(decided_at, 3)
        entry["save_exit_s"] = round(time.time() - decided_at, 3)
    outcome.user_attrs["pauses"] = [*(trial.user_attrs.get("pauses") or []), entry]
    drop_older_checkpoints(checkpoint, outcome.user_attrs.get("best_checkpoint"), config.spec.output_dir)
    # With a heartbeat in the same transaction: the pause's bookkeeping must not look like a dead worker.
    if not update_trial(
        study, trial_id(trial), only_if=TrialState.RUNNING, user_attrs=outcome.user_attrs, heartbeat=True
    ):
        return "lost"  # failed meanwhile (a stale heartbeat): its retry goes on from the checkpoint
    # The store first: once paused in the database another worker may resume it and finish it, and a "paused" written
    # after that (this worker stopped in between) overwrote "completed" (tests/chaos/campaign.py seed 182021, SIGSTOP).
    _event(config, trial.number, "paused", f"paused at step {step} (value {value})", step=step)
    if not pause_trial(study, trial_id(trial), step=step, checkpoint=str(checkpoint), value=value):
        # Failed meanwhile (no heartbeat within the grace period): the store says so again, over the "paused" above.
        _event(config, trial.number, "failed", "failed before its pause was recorded: no heartbeat in time")
        return "lost"
    return "paused"


_events: dict[str | None, KeptOpenEvents] = {}  # by store location: kept open for the worker's events


def _event(config: WorkerConfig, number: int, kind: str, message: str, **data: Any) -> None:
    location = store_location(config.spec)
    events = _events.get(location)
    if events is None:
        events = _events[location] = KeptOpenEvents(config.spec)
    events.record(trial_run_id(config.spec.study.name, number), kind, message, data)


def status_file(config: WorkerConfig) -> Path | None:
    if config.status_dir is None:
        return None
    config.status_dir.mkdir(parents=True, exist_ok=True)
    return config.status_dir / f"slot-{config.slot.index}.json"


# ---- the loop -----------------------------------------------------------------------------------------------------
def run_worker(config: WorkerConfig) -> int:
    stop = StopRequests()
    stop.install()
    # A stop during an outage: the worker leaves without waiting for the storage; its trial saved a checkpoint and
    # stays RUNNING, and the next run finds its worker gone and queues it again to resume.
    with outage.stop_waiting_when(lambda: stop.level > 0):
        return _run_worker(config, stop)


def _run_worker(config: WorkerConfig, stop: StopRequests) -> int:
    outage.set_timeout(config.spec.storage_options.outage_timeout)
    die_with_parent(config.parent_pid)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    resources = config.spec.resources
    study = open_worker_study(
        config.spec,
        config.storage_url,
        worker_index=config.worker_index,
        heartbeat_interval=resources.heartbeat_interval,
        grace_period=resources.grace_period,
        started_before=config.started_before,
    )
    warm_up(config.spec)
    gc.freeze()  # the warm imports: forked trials neither copy them on write nor walk them in gc.collect()
    lock_dir = Path(config.spec.output_dir)
    status = status_file(config)
    gate = make_gate(config)
    chores = Chores(config, study)
    asha_plan, pbt_plan = AshaPlan.of(config.spec), PbtPlan.of(config.spec)
    backoff = Backoff()
    # The sweeps for dead workers' trials (stale heartbeats, claimers that died, lost retries) read the study: at most
    # once a second, not at every claim (a PBT member pauses and resumes several times a second; a dead worker's
    # trial is found after its grace period of seconds anyway).
    sweeps = Every(min(SWEEP_EVERY_S, float(resources.heartbeat_interval)))
    while stop.level == 0 and (config.deadline is None or time.time() < config.deadline):
        if gate is not None and not (decision := gate.decide(study, None)).start:
            # Claim nothing the GPU cannot take yet.
            _write_idle(status, config, "waiting", note=decision.reason)
            time.sleep(POLL_S)
            continue
        claimed_at = time.time()
        swept = sweeps.due()
        # Whole, from the claim lock: on PostgreSQL an outage frees the lock (hpo.storage.database.claim_lock).
        policy = retry_policy(config) if swept else None
        claimed = outage.ride(
            lambda policy=policy: claim_trial(study, config.n_trials, lock_dir, policy, asha_plan, pbt_plan),
            "claim a trial",
        )
        if claimed is None and not swept:
            sweeps.last = float(
                "-inf"
            )  # nothing left, unless a sweep queues a dead worker's trial again: one first
            continue
        if claimed is None:
            break
        if claimed == WAIT:
            _write_idle(status, config, "waiting")
            backoff.wait()
            continue
        backoff.reset()
        assert isinstance(claimed, optuna.Trial)
        try:
            result = run_one(study, claimed, config, stop, claimed_at, gate, chores.run)
        except Exception as error:  # noqa: BLE001 - e.g. a search space the sampler rejects: fail this trial only
            logger.exception("trial %d could not start", claimed.number)
            fail_unstarted(study, claimed, error)
            continue
        ended = finish(study, claimed, result, config)
        # A PBT member that paused frees no checkpoint: members keep theirs until the study ends, and its own older
        # ones went with the pause (hpo.scheduling.promotion.drop_older_checkpoints). A read of the study saved.
        chores.due = chores.due or not (pbt_plan is not None and ended == "paused")
        _write_idle(status, config, "idle")
    if stop.level == 0 and config.deadline is not None and time.time() >= config.deadline:
        outage.ride(lambda: time_is_up(study, config, lock_dir), "end paused trials")
    chores.run()
    release_warm()
    reap_exited()
    _write_idle(status, config, "stopped")
    return 0


def fail_unstarted(study: optuna.Study, trial: optuna.Trial, error: Exception) -> None:
    """FAIL a trial that could not start, with its error. One ended meanwhile stays as it is: swept as stale while this
    worker was stopped, it has its retry queued already (tests/chaos/campaign.py seed 508: the second error ended the worker)."""
    try:
        trial.set_user_attr("error", f"{type(error).__name__}: {error}")
        study.tell(trial, state=TrialState.FAIL)
    except (optuna.exceptions.UpdateFinishedTrialError, RuntimeError, ValueError) as ended:
        logger.warning("trial %d: ended meanwhile: %s", trial.number, ended)


def time_is_up(study: optuna.Study, config: WorkerConfig, lock_dir: Path) -> None:
    """The run's time limit passed: no configuration starts any more, so a paused trial that could not be promoted
    even if none came after it never will be; it ends PRUNED at its rung now rather than wait forever. A paused PBT
    member ends COMPLETE at its interval (hpo.scheduling.pbt_time_up). Every worker does this as it leaves, after its
    last trial paused, so the last one out judges every pause."""
    if PbtPlan.of(config.spec) is not None:
        with claim_lock(storage_of(study), study.study_name, lock_dir):
            members = end_paused_members(study, config.spec)
        if members:
            logger.info(
                "time is up: paused members %s end at their interval", [t.number for t, _, _ in members]
            )
        return
    plan = AshaPlan.of(config.spec)
    if plan is None:
        return
    with claim_lock(storage_of(study), study.study_name, lock_dir):
        ended = end_hopeless(study, plan, config.n_trials, time_up=True)
    if ended:
        logger.info("time is up: trials %s end PRUNED at their rung", ended)


class Chores:
    """Housekeeping after a trial (bound the disk: `study.keep_checkpoints`), done while the next trial's process
    starts rather than between the two trials; at the latest when the worker leaves."""

    def __init__(self, config: WorkerConfig, study: optuna.Study) -> None:
        self.config, self.study, self.due = config, study, False

    def run(self) -> None:
        if self.due:
            self.due = False
            _after_trial(self.config, self.study)


def warm_up_ahead() -> None:
    """Load, once, what every trial would otherwise load after its fork and what needs no study: what torch loads lazily
    on first use (building an optimizer imports torch._dynamo: about a second; the first `torch.manual_seed` looks for
    every kind of device), the first Trainer's own one-time work (`trainer.prepare_for_fork`), and the run row's
    package versions and git commit (two git commands and a walk of site-packages: about 0.1 s a trial). `main` runs it
    before it reads its WorkerConfig, so it overlaps the scheduler's own imports and dry run instead of following
    them. No tensor work is done, so no thread pool exists yet when the trials are forked."""
    torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))])
    # Re-seeding with the seed torch drew at start-up leaves this process's generator as it was.
    torch.manual_seed(torch.initial_seed())
    prepare_for_fork()  # what each trial's first Trainer would do once: annotations resolved, lazy imports done
    environment.package_versions()
    environment.git_commit()


def warm_up(spec: StudySpec) -> None:
    """What the study's own trials share, loaded once before the forks: a task module, and its datasets when its
    data() takes no parameters (not loaded by every trial); peft for a study with adapters."""
    if spec.peft is not None:  # every trial wraps its model with peft (hpo.trial.adapter imports it on use)
        importlib.import_module("peft")
    try:
        task = spec.task.resolve()
        if (
            task.shared_data
        ):  # a data() without parameters: every trial forked from here shares these datasets
            threads = torch.get_num_threads()
            torch.set_num_threads(
                1
            )  # tensor copies stay on this thread: no OpenMP pool exists before the forks
            try:
                task.data({})
            finally:
                torch.set_num_threads(threads)
    except Exception as error:  # noqa: BLE001 - the trial reports a broken task as its own failure
        logger.warning("could not load the task ahead of the trials: %s", error)


def _after_trial(config: WorkerConfig, study: optuna.Study) -> None:
    try:
        after_trial(config.spec, study)
    except Exception as error:  # noqa: BLE001 - housekeeping must not end the worker
        logger.warning("after-trial housekeeping failed: %s", error)


def _write_idle(path: Path | None, config: WorkerConfig, state: str, **fields: Any) -> None:
    if path is not None:
        record = {"slot": config.slot.label, "state": state, "updated": time.time(), "pid": os.getpid()}
        write_status(path, {**record, **fields})


def main() -> int:
    warm_up_ahead()  # while the scheduler imports and checks the study; a worker not needed then only wasted this
    try:
        config: WorkerConfig = pickle.load(
            sys.stdin.buffer
        )  # from our own scheduler process, never from a user
    except EOFError:
        return 0  # started ahead (hpo.scheduling.pool.start_workers_ahead), then not needed
    logging.basicConfig(level=logging.WARNING, format="worker %(process)d: %(message)s")
    try:
        code = run_worker(config)
    except StorageUnreachable as error:
        # Its trial saved a checkpoint and stopped (`stop_level`), and stays RUNNING: the next run finds its worker
        # gone and queues it again to resume. The pool stops the other workers and `hpo run` exits 75.
        logger.warning("%s; leaving (exit %d)", error, EXIT_STORAGE_UNREACHABLE)
        code = EXIT_STORAGE_UNREACHABLE
    except StoppedWaiting as error:
        logger.warning("%s; leaving (exit %d)", error, StoppedWaiting.exit_code)
        code = StoppedWaiting.exit_code
    finally:
        # However the worker ends: its warm trial process waits for a next trial, and Python's exit would join it.
        release_warm()
    gc.freeze()  # the interpreter's last collections would walk everything torch made: seconds off the study's end
    return code


if __name__ == "__main__":
    sys.exit(main())
