"""Records a run in the experiment store as the Trainer runs it.

    on_train_begin  runs row (params, arguments, host, slot, devices, command, packages, git commit) + "started"
    on_step_begin   (first step only) "resumed" when training continues from a checkpoint
    on_log          one metrics row per number of every log record, at the global step
    on_evaluate     "evaluated" event with the evaluation's metrics
    on_save         a checkpoint artifact (sha256 and size computed off the training thread)
    on_train_end    the final TrainerState, end time and memory peaks (peak_gpu_memory, peak_rss), trainable parameters
                    and the checkpoint's size (trainable_params, checkpoint_bytes); rows flushed
    finish(...)     status, objective and the terminal event ("completed", "pruned", "failed", "interrupted")

Only the main process of a distributed run writes. Rows go through a `BackgroundWriter`: nothing here waits on the
database, and a database that is down costs rows, not the run.
"""

from __future__ import annotations

import math
import os
import threading
import time
from pathlib import Path
from typing import Any

from hpo.tracking import environment
from hpo.tracking.footprint import footprint
from hpo.tracking.logs import arguments_dict, numeric_items, state_summary
from hpo.tracking.run_info import RunInfo
from hpo.tracking.store import Batch, ExperimentStore, open_store, trial_run_id
from hpo.tracking.trial_tracker import TrialTracker
from hpo.tracking.writer import BackgroundWriter

ORIGIN_ATTEMPTS, ORIGIN_RETRY_S = 120, 0.5  # a retry's origin, while the store does not answer: a minute


def origin_recorded(store: ExperimentStore, run_id: str) -> bool:
    """Whether an earlier piece of this attempt recorded its "retried" event (the one naming the trial it continues).
    Asked of the store, not of the trial's state: a retry parked paused at a rung (ASHA) or an interval (PBT) runs its
    first training in a resumed process. The worker's own "retried" event on this run (this attempt was queued again
    in its turn) names no trial and does not count."""
    return any("requeued_from_trial" in (e["data"] or {}) for e in store.events(run_id, kind="retried"))


def origin_rows(run: RunInfo) -> Batch | None:
    """A retry's "retried" event (naming the trial it continues) and the status of that earlier run, which died
    without ending itself; None for a run that continues nothing. Events on the earlier run are the requeuer's."""
    origin = run.origin
    previous = origin.get("requeued_from_trial")
    if previous is None or run.kind != "trial":
        return None
    reason = str(origin.get("retry_reason") or "queued again")
    status = "interrupted" if "interrupt" in reason.lower() else "failed"
    if "out of memory" in reason.lower() and origin.get("oom_retry"):
        # It ran out of GPU memory beside other trials: not a failure of its configuration.
        status = "requeued"
    event = {
        "run_id": run.run_id,
        "time": time.time(),
        "kind": "retried",
        "message": f"retry of trial-{previous}: {reason}",
        "data": {**origin, "retry_trial": run.trial_number},
    }
    earlier = {"id": trial_run_id(run.study_name, int(previous)), "status": status}
    return Batch(runs=[earlier], events=[event])


def record_origin(location: str, run: RunInfo) -> bool:
    """Write a retry's origin (`origin_rows`) at once, in one transaction, unless a piece of it did already. Written
    at once, not queued: a retry SIGKILLed before its writer flushed, or before its training began, left no "retried"
    event (found by tests/chaos/campaign.py). The scheduler's worker calls it before the trial's process starts, the store
    callback again as training begins. False when the store could not be reached (the caller may queue the rows)."""
    rows = origin_rows(run)
    if rows is None:
        return True
    try:
        store = open_store(location)
    except Exception:  # noqa: BLE001 - a store that is down costs rows, never the run
        return False
    try:
        if not origin_recorded(store, run.run_id):
            store.write(rows)
        return True
    except Exception:  # noqa: BLE001
        return False
    finally:
        store.close()


class ExperimentStoreCallback(TrialTracker):
    checkpoint_may_be_in_flight = True  # on_save records the checkpoint's path; it need not be in place yet

    def __init__(self, location: str, run: RunInfo, *, flush_interval: float = 1.0) -> None:
        super().__init__()
        self.location = location
        self.run = run
        self.flush_interval = flush_interval
        self.writer: BackgroundWriter | None = None
        self.first_step_seen = False
        self.saved: list[dict[str, Any]] = []  # checkpoint rows waiting for their folder to be in place

    # ---- Trainer events -----------------------------------------------------------------------------------------
    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero or self.writer is not None:
            return
        self.writer = self._new_writer()
        self.writer.submit("runs", self._run_row(args))
        self._record_origin()
        self._event("started", "", {"output_dir": self.run.output_dir})
        self.first_step_seen = False

    def on_step_begin(self, args, state, control, **kwargs):
        # The Trainer restores a checkpoint after on_train_begin, so a resumed run shows itself at its first step.
        if self.first_step_seen or self.writer is None:
            return
        self.first_step_seen = True
        if state.global_step > 0:
            self._event("resumed", f"resumed at step {state.global_step}", {"global_step": state.global_step})

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.writer is None or not logs:
            return
        if self.saved:
            self._submit_saved(kwargs.get("trainer"))
        # One queue item per record; the writer thread splits it into metric rows, off the training thread.
        record = {
            "run_id": self.run.run_id,
            "step": state.global_step,
            "epoch": logs.get("epoch", state.epoch),
        }
        self.writer.submit("log", {**record, "time": time.time(), "values": dict(logs)})

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if self.writer is not None:
            numbers_only = numeric_items(metrics or {})
            self._event(
                "evaluated", f"step {state.global_step}", {"step": state.global_step, "metrics": numbers_only}
            )

    def on_save(self, args, state, control, **kwargs):
        checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        trainer = kwargs.get("trainer")
        in_flight = trainer is not None and trainer.checkpoint_in_flight(state.global_step)
        if self.writer is not None and (in_flight or checkpoint.is_dir()):
            row = {"run_id": self.run.run_id, "kind": "checkpoint", "path": str(checkpoint)}
            self.saved.append({**row, "step": state.global_step, "time": time.time()})
            self._submit_saved(trainer)

    def _submit_saved(self, trainer: Any) -> None:
        """The rows of the checkpoints now in place: the writer digests the folder, so it must be there (a
        checkpoint's rename may still be under way on the trainer's background thread)."""
        while self.saved and not (
            trainer is not None and trainer.checkpoint_in_flight(self.saved[0]["step"])
        ):
            self.writer.submit("artifacts", self.saved.pop(0))  # type: ignore[union-attr]

    def on_train_end(self, args, state, control, **kwargs):
        super().on_train_end(args, state, control, **kwargs)
        if self.writer is None:
            return
        self._submit_saved(None)  # training ends with every checkpoint in place
        summary = state_summary(state)
        peaks = getattr(state, "peak_memory", None) or {}
        row = {"id": self.run.run_id, "state": summary, "ended_at": time.time()}
        row.update(peak_gpu_memory=peaks.get("gpu_reserved"), peak_rss=peaks.get("cpu_rss"))
        row.update(footprint(kwargs.get("model"), state, args.output_dir))
        self.writer.submit("runs", row)
        # A trial process may end right after training: make the rows durable now, not at some later close.
        self.writer.flush(timeout=30)

    # ---- the result, from the study manager (or a fallback) --------------------------------------------------
    def record_end(
        self,
        status: str,
        values: list[float] | None,
        best_step: int | None,
        error: str | None,
        data: dict[str, Any],
    ) -> None:
        if self.writer is None:
            if os.environ.get("RANK", "0") != "0":
                return  # another rank of a distributed run; rank 0 records it
            # Training never began (model_init or data raised): the run still gets its row and its ending.
            self.writer = self._new_writer()
            self.writer.submit("runs", self._run_row(None))
            self._record_origin()
        objective = values[0] if values and math.isfinite(values[0]) else None
        extra = {"values": values, "best_step": best_step, "error": error, **(data or {})}
        self.writer.submit(
            "runs",
            {
                "id": self.run.run_id,
                "status": status,
                "objective": objective,
                "extra": extra,
                "ended_at": time.time(),
            },
        )
        message = error or (f"objective {objective}" if objective is not None else status)
        self._event(status, message, {"values": values, "best_step": best_step, **(data or {})})
        self.writer.close(timeout=30)

    # ---- helpers ------------------------------------------------------------------------------------------------
    def _event(self, kind: str, message: str, data: dict[str, Any]) -> None:
        assert self.writer is not None
        row = {"run_id": self.run.run_id, "time": time.time(), "kind": kind, "message": message, "data": data}
        self.writer.submit("events", row)

    def _new_writer(self) -> BackgroundWriter:
        location = self.location
        return BackgroundWriter(lambda: open_store(location), flush_interval=self.flush_interval)

    def _record_origin(self) -> None:
        """A retry's "retried" event and its predecessor's status (see `record_origin`), usually written already by
        the worker before this process started. When the store does not answer (a restart, say), asked and written
        again off the training thread: not queued blindly, since the worker's write may have landed (a queued copy then
        made two "retried" events for one attempt; tests/chaos/campaign.py seed 977111, a PostgreSQL restart)."""
        if origin_rows(self.run) is None or record_origin(self.location, self.run):
            return
        thread = threading.Thread(target=self._retry_origin, name="hpo-store-origin", daemon=True)
        thread.start()

    def _retry_origin(self) -> None:
        for _ in range(ORIGIN_ATTEMPTS):
            time.sleep(ORIGIN_RETRY_S)
            if record_origin(self.location, self.run):
                return

    def _run_row(self, args: Any) -> dict[str, Any]:
        run = self.run
        return {
            "id": run.run_id,
            "kind": run.kind,
            "study_name": run.study_name,
            "trial_number": run.trial_number,
            "name": run.name,
            "status": "running",
            "params": run.params,
            "arguments": arguments_dict(args),
            "started_at": time.time(),
            "host": environment.host(),
            "slot": run.slot,
            "devices": run.devices,
            "command": environment.command_line(),
            "packages": environment.package_versions(),
            "git_commit": environment.git_commit(),
            "output_dir": run.output_dir,
        }
