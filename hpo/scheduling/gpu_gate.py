"""The GPU gate: whether a slot's next trial may start on a GPU that trials of the study already use.

Slots that share a GPU (`resources.trials_per_gpu` other than 1) are worker processes of their own; they agree through
files, one folder per GPU under the study's output folder, and a lock file beside it:

    <output_dir>/.hpo/gpus/<host>-gpu<index>/slot-<k>-<pid>.json   a trial on the GPU: its number, the footprint
                                                            expected of it (None: not known, nothing may join it),
                                                            its pids, its parameters, whether it runs alone
    admit(params):  under the lock: read NVML's figures for the GPU, the records of the live slots, the peaks measured
                    so far in the study -> `packing.may_start_trial`; on "start" write this slot's record, so the next
                    slot to decide counts this trial at its full expected size even before it has allocated anything
    release():      remove the record when the trial has ended

The expected footprint of the next trial is the study's largest measured peak (trial attribute `peak_gpu_memory`, the
Trainer's peak reserved memory, plus the CUDA context), scaled by the batch size or sequence length when the next
trial's are larger (`packing.expected_peak`). A running trial counts as measured once it has taken
`MEASURED_AFTER_STEPS` steps in its process: by then its weights, gradients, optimizer state and a step's activations
are allocated, and its slot's status record carries PyTorch's peak so far; so the first trial runs alone for seconds,
not for its whole run. (A later rise, e.g. a longer batch, is what the margin and the out-of-memory requeue are for.) A trial queued again after running out of memory beside others runs
alone: its record says "not known", so no trial joins it and it starts only on a GPU its study has left.

Figures come from a `MemoryReader`: NVML by default (`NvmlMemory`, which never initialises CUDA). A reader is any
callable from a GPU index to `GpuMemory` (None: not readable); `run_trials(gpu_memory=...)` passes one to the workers,
and the environment variable HPO_GPU_MEMORY_READER=module:function names one for `hpo run` / `hpo worker` (a simulated
GPU, or a device NVML does not see). Where memory cannot be read at all, trials on a GPU run one at a time.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from hpo.errors import ConfigError
from hpo.scheduling.devices import DeviceId
from hpo.scheduling.gpu_memory import GpuMemory, GpuMemoryReader
from hpo.scheduling.packing import (
    MeasuredTrial,
    PackingDecision,
    RunningTrial,
    expected_peak,
    footprint,
    may_start_trial,
)
from hpo.storage.retry import process_alive

MemoryReader = Callable[[int], GpuMemory | None]
READER_VARIABLE = "HPO_GPU_MEMORY_READER"
# The trial attribute run_trial records: PyTorch's peak reserved bytes on the GPU.
PEAK_ATTR = "peak_gpu_memory"
# On a trial queued again after a CUDA out-of-memory beside others: it runs alone.
OOM_RETRY_ATTR = "oom_retry"
MEASURED_AFTER_STEPS = 2


class NvmlMemory:
    """Reads one GPU's memory through NVML, opened on first use and kept open (a read then takes microseconds)."""

    def __init__(self) -> None:
        self.reader: GpuMemoryReader | None = None
        self.opened = False

    def __call__(self, index: DeviceId) -> GpuMemory | None:
        if not self.opened:
            self.reader, self.opened = GpuMemoryReader.open(), True
        if self.reader is None:
            return None
        found = self.reader.read([str(index)])
        return found[0] if found else None


def default_reader() -> MemoryReader:
    """The function HPO_GPU_MEMORY_READER names, else NVML."""
    named = os.environ.get(READER_VARIABLE)
    if not named:
        return NvmlMemory()
    module, _, name = named.partition(":")
    try:
        reader = getattr(__import__(module, fromlist=[name]), name)
    except (ImportError, AttributeError) as error:
        raise ConfigError(
            f"{READER_VARIABLE}={named}: cannot import it ({error}); give module:function"
        ) from error
    return reader


def gate_dir(output_dir: str | Path, gpu: DeviceId) -> Path:
    # An old-style MIG UUID ("MIG-GPU-<uuid>/1/0") holds slashes: one folder all the same.
    return Path(output_dir) / ".hpo" / "gpus" / f"{socket.gethostname()}-gpu{str(gpu).replace('/', '_')}"


class GpuGate:
    """One slot's view of its GPU (the first of its devices): admit its next trial, release it, tell who shares."""

    def __init__(
        self,
        directory: Path,
        gpu: DeviceId,
        slot: int,
        cap: int | str,
        read_memory: MemoryReader,
        threads: int = 1,
        margin: int | None = None,
        status_file: Path | None = None,
    ) -> None:
        self.directory, self.gpu, self.slot, self.cap = directory, gpu, slot, cap
        self.read_memory, self.threads, self.margin = read_memory, threads, margin
        # The slot's live-table record, where its trial says what its PyTorch holds.
        self.status_file = status_file
        # Slot and pid: two `hpo worker` runs of one study on one machine both have a slot 0.
        self.record_path = directory / f"slot-{slot}-{os.getpid()}.json"
        self.shared = False  # whether another trial was on the GPU when this slot's trial was admitted

    # ---- deciding ---------------------------------------------------------------------------------------------------
    def decide(
        self, study: optuna.Study, params: Mapping[str, Any] | None, alone: bool = False
    ) -> PackingDecision:
        """Whether a trial with `params` (None: not sampled yet) may start now; `alone`: only on a GPU with none of
        the study's trials. Reads, writes nothing."""
        return self._decide(study, params, alone)[0]

    def _decide(
        self, study: optuna.Study, params: Mapping[str, Any] | None, alone: bool
    ) -> tuple[PackingDecision, int | None]:
        """The decision, and the footprint expected of the trial (None: not known)."""
        running = self.running()
        so_far = [running_peak(record) for record in running]
        measured = measured_trials(study) + [
            MeasuredTrial(record.get("params") or {}, peak)
            for record, peak in zip(running, so_far, strict=True)
            if peak is not None
        ]
        next_peak = None if alone else expected_peak(measured, params or {})
        memory = self.read_memory(self.gpu)
        if memory is None:
            if running:
                reason = f"wait: GPU {self.gpu}'s memory cannot be read; one trial at a time"
                return PackingDecision(False, reason), next_peak
            return PackingDecision(True, f"start: no trial on GPU {self.gpu}"), next_peak
        decision = may_start_trial(
            total=memory.total,
            free=memory.free,
            running=[
                RunningTrial(_larger(record.get("expected_peak"), peak), held(record, memory))
                for record, peak in zip(running, so_far, strict=True)
            ],
            next_peak=next_peak,
            cap=self.cap if self.cap == "auto" else int(self.cap),
            free_cpu_cores=self.threads,  # the slots per GPU are already bounded by the cores (hpo.scheduling.slots)
            cores_per_trial=self.threads,
            margin=self.margin,
        )
        return decision, next_peak

    def admit(
        self, study: optuna.Study, trial_number: int, params: Mapping[str, Any], alone: bool = False
    ) -> PackingDecision:
        """Decide under the GPU's lock and, on "start", record the trial so that the next decision counts it."""
        with self._locked():
            running = self.running()
            decision, peak = self._decide(study, params, alone)
            if decision.start:
                self.shared = bool(running)
                record = {"trial": trial_number, "expected_peak": peak, "pids": [], "worker": os.getpid()}
                record.update(alone=alone, params=dict(params))
                self._write({**record, "status_file": str(self.status_file) if self.status_file else None})
        return decision

    def set_pids(self, pids: list[int]) -> None:
        """The trial's processes, whose memory NVML lists: what they hold is no longer still to come."""
        record = self._read(self.record_path)
        if record is not None:
            self._write({**record, "pids": pids})

    def release(self) -> None:
        self.record_path.unlink(missing_ok=True)

    def others_running(self) -> int:
        """How many other trials of the study are on this GPU now (for a trial that just ran out of memory)."""
        return len(self.running())

    def running(self) -> list[dict[str, Any]]:
        """The records of the other live slots on this GPU (a record whose worker died is left out)."""
        records = []
        for path in sorted(self.directory.glob("slot-*.json")) if self.directory.is_dir() else []:
            record = self._read(path)
            if path == self.record_path or record is None:
                continue
            worker = record.get("worker")
            if worker and process_alive(int(worker)):
                records.append(record)
            elif record.get("worker") is not None:
                path.unlink(missing_ok=True)  # left by a worker that died (its trial died with it)
        return records

    # ---- files ------------------------------------------------------------------------------------------------------
    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory.with_suffix(".lock"), "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _write(self, record: dict[str, Any]) -> None:
        temporary = self.record_path.with_name(f".{self.record_path.name}.tmp")
        temporary.write_text(json.dumps(record))
        os.replace(temporary, self.record_path)

    @staticmethod
    def _read(path: Path) -> dict[str, Any] | None:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None


def running_peak(record: dict[str, Any]) -> int | None:
    """The footprint a running trial has reached so far, once it has taken MEASURED_AFTER_STEPS steps on the GPU;
    None before that, without a status record, or for a trial that runs alone (nothing may join it)."""
    if record.get("alone") or not record.get("status_file"):
        return None
    status = GpuGate._read(Path(record["status_file"]))
    if not status or status.get("trial") != record.get("trial") or status.get("gpu_memory_peak") is None:
        return None
    if int(status.get("steps_run", 0)) < MEASURED_AFTER_STEPS:
        return None
    return footprint(int(status["gpu_memory_peak"]))


def _larger(expected: int | None, so_far: int | None) -> int | None:
    if expected is None or so_far is None:
        return so_far if expected is None else expected
    return max(expected, so_far)


def held(record: dict[str, Any], memory: GpuMemory) -> int:
    """What a running trial holds on the GPU now: NVML's figures for its processes; where NVML lists none of them
    (in a container NVML reports the host's pids), what its PyTorch says it reserves (the slot's status record) plus
    the CUDA context; 0 before it has touched the GPU."""
    by_nvml = sum(memory.processes.get(int(pid), 0) for pid in record.get("pids", []))
    if by_nvml or not record.get("status_file"):
        return by_nvml
    status = GpuGate._read(Path(record["status_file"]))
    if not status or status.get("trial") != record.get("trial") or status.get("gpu_memory") is None:
        return 0
    return footprint(int(status["gpu_memory"]))


def measured_trials(study: optuna.Study) -> list[MeasuredTrial]:
    """The study's trials that recorded their GPU peak, with their footprint as NVML counts it."""
    finished = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
    return [
        MeasuredTrial(dict(trial.params), footprint(int(trial.user_attrs[PEAK_ATTR])))
        for trial in study.get_trials(deepcopy=False, states=finished)
        if trial.user_attrs.get(PEAK_ATTR)
    ]
