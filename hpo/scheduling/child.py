"""A trial's own process(es), forked from a worker that has already imported torch, so a trial starts in milliseconds.

On the CPU a one-rank trial's process stays once it has sent its result and runs the worker's next trial (`keep_warm`,
unless `resources.fresh_process_per_trial`): no fork, no exit, and no cold start (a new process's first steps fault in
the pages it shares with the worker). A crash still takes down one trial; the next gets a new process. On GPUs, and
for multi-rank trials, each trial has its own processes, which give their memory back when it ends.

With `ranks > 1` the worker forks one process per rank with the torchrun variables set (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT); rank 0 holds the Optuna trial, the others an `optuna.trial.FixedTrial` with the parameters
the worker sampled before forking, so every rank builds the same model. Pruning decisions are broadcast by
`hpo.trial.pruning`; an interrupt is broadcast here, so all ranks stop, and save, at the same step.

Signals: a trial process ignores SIGINT (Ctrl-C belongs to the scheduler) and treats SIGTERM, sent by its worker, as
"save a checkpoint at the next step boundary and stop". Before training starts there is nothing to save: it just ends.
It dies with its worker (PR_SET_PDEATHSIG), so a SIGKILLed worker leaves no orphan training on.
"""

from __future__ import annotations

import ctypes
import gc
import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import optuna
import psutil
import torch

from hpo.scheduling.pbt import PbtPlan, pbt_pause_callback
from hpo.scheduling.pbt_in_place import in_place_after_save
from hpo.scheduling.promotion import AshaPlan, pause_callback
from hpo.spec import StudySpec
from hpo.storage import outage
from hpo.tracking.wandb_callback import release_wandb, wandb_imported
from hpo.trial.callbacks import (
    InterruptCallback,
    SlotStatusCallback,
    begin_next_run,
    interrupt_requested,
    on_sigterm,
)
from hpo.trial.run import run_trial
from trainer import TrainerCallback
from trainer.hyperparams import HyperparameterSchedule
from trainer.launch import free_port

_PR_SET_PDEATHSIG = 1
GC_AFTER_GROWTH_BYTES = 256 * 2**20


@dataclass
class TrialJob:
    spec: StudySpec
    study: optuna.Study
    trial: optuna.Trial
    params: dict[str, Any]
    resume_from: str | None
    ranks: int
    threads: int
    worker_pid: int
    status_file: Path | None = None
    metric: str | None = None
    status_base: dict[str, Any] = field(default_factory=dict)
    asha: AshaPlan | None = None  # pause at its rungs (hpo.scheduling.promotion)
    lock_dir: Path | None = None
    gpu_shared: Callable[[], int] | None = None  # other trials on this trial's GPU (the GPU gate's count)
    pbt: PbtPlan | None = None  # pause at every interval (hpo.scheduling.pbt)
    member_params: dict[str, Any] | None = None  # a PBT member's current values, in place of the sampled ones
    changes: dict[int, dict[str, Any]] = field(
        default_factory=dict
    )  # applied at those steps (a copied checkpoint)
    # Return with rank 0's result while the process is still exiting (it is joined before the next fork), so the
    # worker records the outcome meanwhile. Not on a GPU: the next trial must find the memory given back.
    exit_in_background: bool = False
    # After its result the process waits for the worker's next trial of the same study (`NextTrial`) instead of
    # exiting: the next trial, or a paused trial's resume, costs no fork, no process exit and no cold start.
    keep_warm: bool = False


@dataclass(frozen=True)
class NextTrial:
    """What changes from one trial to the next in a warm trial process (plain data: the pipe pickles it)."""

    trial_id: int
    params: dict[str, Any]
    resume_from: str | None
    status_base: dict[str, Any]
    member_params: dict[str, Any] | None
    changes: dict[int, dict[str, Any]]

    @classmethod
    def of(cls, job: TrialJob) -> NextTrial:
        return cls(
            trial_id=job.trial._trial_id,  # noqa: SLF001
            params=job.params,
            resume_from=job.resume_from,
            status_base=job.status_base,
            member_params=job.member_params,
            changes=job.changes,
        )

    def applied_to(self, job: TrialJob) -> TrialJob:
        """`job` for this trial, with the trial read again from the database (the worker wrote its attributes)."""
        return replace(
            job,
            trial=optuna.Trial(job.study, self.trial_id),
            params=self.params,
            resume_from=self.resume_from,
            status_base=self.status_base,
            member_params=self.member_params,
            changes=self.changes,
        )


@dataclass
class ChildResult:
    outcome: Any | None  # hpo.trial.run.TrialOutcome from rank 0, None when rank 0 sent nothing
    interrupted_at: int | None = (
        None  # the step at which an interrupt stopped training (-1: before it started)
    )
    first_step_at: float | None = None  # unix time the first training step began (for the start-up overhead)
    exit_codes: list[int | None] = field(default_factory=list)

    @property
    def crashed(self) -> bool:
        return self.outcome is None and self.interrupted_at is None

    def describe_crash(self) -> str:
        parts = []
        for rank, code in enumerate(self.exit_codes):
            if code is None or code == 0:
                continue
            how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
            parts.append(f"rank {rank} {how}" if len(self.exit_codes) > 1 else f"trial process {how}")
        return "crashed: " + ("; ".join(parts) or "trial process ended without a result")


# ---- in the trial process ----------------------------------------------------------------------------------------
def die_with_parent(parent_pid: int | None) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux); exit now if that already happened."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)


def trial_process(job: TrialJob, rank: int, port: int, connection: Connection | None) -> None:
    """The body of one rank: run the trial and send rank 0's outcome to the worker; a warm process (`keep_warm`) then
    runs the trials the worker sends next, until it sends None, goes away, or asked this process to stop."""
    _set_up_process(job, rank, port)
    _run_once(job, rank, connection)
    collector = GrowthCollector()
    while job.keep_warm and connection is not None and not interrupt_requested():
        collector.after_run()
        try:
            following = connection.recv()
        except (
            EOFError,
            OSError,
            KeyboardInterrupt,
        ):  # the worker closed the pipe, or a stop came while idle
            return
        if following is None:
            return
        job = following.applied_to(job)
        begin_next_run()
        _run_once(job, rank, connection)


class GrowthCollector:
    """A warm trial process's memory between trials. The Trainer frees its model and optimizer when the trial drops
    it (tests/trainer/test_release.py), but what a task's own code leaves in a reference cycle (a model or dataset that
    refers to itself) is freed only when the garbage collector's thresholds come round; a full collection costs about
    20 ms a time on digits. So collect only once the process has grown by
    `threshold` bytes since the last one: a large model is freed before the next trial builds its own, a small one
    costs nothing."""

    def __init__(self, threshold: int = GC_AFTER_GROWTH_BYTES) -> None:
        self.threshold = threshold
        self._process = psutil.Process()
        self.base = self._process.memory_info().rss

    def after_run(self) -> bool:
        """Collect if grown past the threshold; True when it did."""
        if self._process.memory_info().rss - self.base <= self.threshold:
            return False
        gc.collect()
        self.base = self._process.memory_info().rss
        return True


def _run_once(job: TrialJob, rank: int, connection: Connection | None) -> None:
    wandb_before = wandb_imported()
    try:
        _run_job(job, rank, connection)
    finally:
        # The process leaves by os._exit (multiprocessing's fork start), skipping atexit: wandb's clean-up is ours.
        release_wandb(wandb_before)


def _set_up_process(job: TrialJob, rank: int, port: int) -> None:
    die_with_parent(job.worker_pid)
    # A trial does not wait for the storage (its reports are kept: hpo.trial.pruning, which says so); its worker logs
    # the outage once.
    outage.clock.quiet = True
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, on_sigterm)
    if job.ranks > 1:
        os.environ.update(
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            WORLD_SIZE=str(job.ranks),
            LOCAL_WORLD_SIZE=str(job.ranks),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
        )
    torch.set_num_threads(job.threads)


def _run_job(job: TrialJob, rank: int, connection: Connection | None) -> None:
    trial = job.trial if rank == 0 else optuna.trial.FixedTrial(job.params, job.trial.number)
    interrupt = InterruptCallback()
    callbacks: list[TrainerCallback] = [interrupt]
    if rank == 0 and job.status_file is not None:
        callbacks.append(SlotStatusCallback(job.status_file, job.metric, job.status_base))
    if job.asha is not None:
        lock_dir = job.lock_dir or Path(job.spec.output_dir)
        callbacks.append(pause_callback(job.study, job.trial, job.asha, lock_dir, rank_zero=rank == 0))
    if job.pbt is not None:
        lock_dir = job.lock_dir or Path(job.spec.output_dir)
        after_save = in_place_after_save(job.study, job.trial, job.pbt, lock_dir)
        callbacks.append(pbt_pause_callback(job.trial, job.pbt, rank_zero=rank == 0, after_save=after_save))
    if job.changes:
        callbacks.append(HyperparameterSchedule(job.changes, job.spec.task.resolve().mutable))
    try:
        # No gc.collect() at the end: this process exits right after, and the system takes its memory back at once
        # (a warm one leaves the last trial's few cycles to the collector's own thresholds).
        outcome = run_trial(
            job.spec,
            job.study,
            trial,
            resume_from=job.resume_from,
            extra_callbacks=callbacks,
            release_memory=False,
            record_start=False,  # the worker stored run_dir, threads and resume point with its own attributes
            gpu_shared=job.gpu_shared,
            params=job.member_params,
        )
    except KeyboardInterrupt:
        if connection is not None:
            connection.send(ChildResult(None, interrupted_at=-1))
        return
    if connection is not None:
        connection.send(ChildResult(outcome, interrupt.stopped_at, interrupt.first_step_at))


# ---- in the worker -------------------------------------------------------------------------------------------------
# Trial processes that sent their result and may still be exiting (TrialJob.exit_in_background).
_exiting: list[Any] = []


@dataclass
class WarmProcess:
    process: Any
    connection: Connection


_warm: list[
    WarmProcess
] = []  # at most one: this worker's trial process waiting for its next trial (keep_warm)


def reap_exited() -> None:
    """Wait for the trial processes that were left exiting."""
    while _exiting:
        _exiting.pop().join()


def release_warm() -> None:
    """Tell the waiting trial process there is no next trial (it exits), and wait for it."""
    while _warm:
        warm = _warm.pop()
        try:
            warm.connection.send(None)
        except OSError:
            pass  # it has gone already
        warm.connection.close()
        warm.process.join(timeout=10)
        if warm.process.exitcode is None:
            warm.process.kill()
            warm.process.join()


def _hand_to_warm(job: TrialJob) -> tuple[list[Any], Connection] | None:
    """Send `job` to the waiting trial process: its processes and connection, or None when there is none to take
    it (none waits, this job does not keep warm, or the process has gone)."""
    if not _warm:
        return None
    warm = _warm[0]
    if not job.keep_warm or not warm.process.is_alive():
        release_warm()
        return None
    try:
        warm.connection.send(NextTrial.of(job))
    except OSError:
        release_warm()
        return None
    _warm.clear()
    return [warm.process], warm.connection


def _fork(job: TrialJob) -> tuple[list[Any], Connection]:
    """Fork the trial's ranks: their processes, and the connection rank 0's result comes back on (both ways for a
    process that stays warm: the worker sends its next trial on it)."""
    reap_exited()
    context = multiprocessing.get_context("fork")
    reader, writer = context.Pipe(duplex=job.keep_warm)
    port = free_port() if job.ranks > 1 else 0
    processes = []
    for rank in range(job.ranks):
        process = context.Process(
            target=trial_process,
            args=(job, rank, port, writer if rank == 0 else None),
            name=f"trial-rank{rank}",
        )
        process.start()
        processes.append(process)
    writer.close()
    return processes, reader


def run_trial_processes(
    job: TrialJob,
    heartbeat: Callable[[], None],
    stop_level: Callable[[], int],
    heartbeat_interval: float,
    on_start: Callable[[list[int]], None] | None = None,
) -> ChildResult:
    """Fork the trial's ranks, keep its heartbeat going, pass on stop requests, and collect rank 0's result.

    `stop_level()`: 0 run on, 1 interrupt (checkpoint and stop), 2 kill now. When one rank dies the others are killed,
    so no rank waits forever in a collective. A `keep_warm` job goes to this worker's waiting trial process when
    there is one, and its process is kept waiting for the next one after it sends its result."""
    started = _hand_to_warm(job)
    if started is None:
        release_warm()
        started = _fork(job)
    processes, reader = started
    leave_early = job.exit_in_background and job.ranks == 1
    try:
        if on_start is not None:
            on_start([process.pid for process in processes])
        result = _supervise(
            processes, reader, heartbeat, stop_level, heartbeat_interval, leave_early, keep_open=job.keep_warm
        )
    except BaseException:
        # No trial trains unsupervised (its trial swept as stale meanwhile could not take its process's identity; a
        # heartbeat raised): its processes end here. A warm one would otherwise wait for a next trial that never
        # comes, and this worker's exit would wait for it (multiprocessing joins its children at exit).
        _signal_all(processes, signal.SIGKILL)
        for process in processes:
            process.join()
        reader.close()
        raise
    if job.keep_warm and result.outcome is not None and processes[0].exitcode is None:
        _warm.append(WarmProcess(processes[0], reader))
        return result
    if job.keep_warm:
        reader.close()
    if leave_early and result.outcome is not None:
        _exiting.extend(processes)
        return result
    for process in processes:
        process.join()
    result.exit_codes = [process.exitcode for process in processes]
    return result


def _supervise(
    processes: list[Any],
    reader: Connection,
    heartbeat: Callable[[], None],
    stop_level: Callable[[], int],
    interval: float,
    leave_on_result: bool = False,
    keep_open: bool = False,
) -> ChildResult:
    result: ChildResult | None = None
    open_reader: Connection | None = reader
    signalled = killed = False
    last_beat = time.monotonic()
    while True:
        waitables = [p.sentinel for p in processes if p.exitcode is None] + (
            [open_reader] if open_reader else []
        )
        if not waitables:
            break
        ready = wait(waitables, timeout=0.2)
        if open_reader is not None and open_reader in ready:
            try:
                result = open_reader.recv()
            except (EOFError, OSError):
                pass
            if not keep_open:
                open_reader.close()
            open_reader = None
            if leave_on_result and result is not None and result.outcome is not None:
                return result
        if time.monotonic() - last_beat >= interval:
            heartbeat()
            last_beat = time.monotonic()
        level = stop_level()
        if level >= 1 and not signalled:
            _signal_all(processes, signal.SIGTERM)
            signalled = True
        failed_rank = any(p.exitcode not in (None, 0) for p in processes)
        if (level >= 2 or failed_rank) and not killed:
            _signal_all(processes, signal.SIGKILL)
            killed = True
    return result or ChildResult(None)


def _signal_all(processes: list[Any], signum: int) -> None:
    for process in processes:
        if process.exitcode is None and process.pid is not None:
            try:
                os.kill(process.pid, signum)
            except ProcessLookupError:
                pass
