"""One TensorBoard run folder per trial (or per `hpo train` run), under `<output_dir>/tensorboard/` by default.

A trial's folder is `trial-<number>`; its hyperparameters (the trial's parameters) are written once, in the folder
itself, so `tensorboard --logdir <study output_dir>` lists every trial in the HParams view beside its curves. Every log
record becomes scalars with transformers' names (`train/loss`, `eval/accuracy`) at the global step. At the end:
`hpo/value` (or `hpo/value/<metric>` for several objectives) at the best step for a completed trial,
`hpo/pruned_step` for a pruned one, and the session's status (success, aborted when pruned, failure). A trial resumed
after a pause, or retried after a crash (its `retry_root` names the first attempt), continues the same folder: the
writer purges what the earlier attempt logged after the step it resumes from, so no step shows twice.
"""

from __future__ import annotations

import importlib
import logging
import math
from pathlib import Path
from typing import Any

from hpo.tracking.logs import numeric_items
from hpo.tracking.run_info import RunInfo
from hpo.tracking.trial_tracker import TrialTracker
from trainer.integrations.logs import rewrite_logs
from trainer.integrations.tensorboard import summary_writer_class

logger = logging.getLogger(__name__)

SESSION_STATUS = {"completed": "success", "pruned": "aborted", "failed": "failure", "interrupted": "aborted"}


def hparams_module() -> Any:
    """trainer.integrations.hparams, imported on first use: it imports tensorboard, an optional package."""
    return importlib.import_module("trainer.integrations.hparams")


def value_tags(objectives: list[str], count: int) -> list[str]:
    """`hpo/value` for one objective, `hpo/value/<metric>` for each of several."""
    if count == 1:
        return ["hpo/value"]
    names = objectives if len(objectives) == count else [str(i) for i in range(count)]
    return [f"hpo/value/{name}" for name in names]


class TensorBoardTrialCallback(TrialTracker):
    def __init__(
        self,
        run: RunInfo,
        folder: str | Path,
        objectives: list[str] | None = None,
        hparam_names: list[str] | None = None,
    ) -> None:
        super().__init__()
        self.run = run
        self.folder = Path(folder)
        self.objectives = list(objectives or [])  # the study's metrics, eval_ prefixed
        self.hparam_names = list(hparam_names or [])  # the search space's names: the HParams view's columns
        self.writer: Any = None

    def _writer(self) -> Any:
        """Opened at the first record, when a resumed Trainer has restored its step: an earlier attempt's events
        from that step on are purged (TensorBoard drops them), and its hyperparameters are not written again."""
        if self.writer is None:
            continuing = any(self.folder.glob("events.out.tfevents.*"))
            purge = self.global_step if continuing and self.global_step > 0 else None
            self.writer = summary_writer_class()(log_dir=str(self.folder), purge_step=purge)
            if not continuing:
                hparams_module().write_hparams(self.writer, self.run.params)
                if self.hparam_names:
                    hparams_module().write_experiment(self.writer, self.hparam_names, self.metric_columns())
        return self.writer

    def metric_columns(self) -> list[str]:
        """The HParams view's metrics: the trial's value(s), the objective metrics' curves, the eval loss, the step a
        pruned trial stopped at."""
        curves = list(rewrite_logs(dict.fromkeys([*self.objectives, "eval_loss"])))
        return [*value_tags(self.objectives, max(len(self.objectives), 1)), *curves, "hpo/pruned_step"]

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        self.global_step = state.global_step
        writer = self._writer()
        for key, value in rewrite_logs(numeric_items(logs)).items():
            if math.isfinite(value):
                writer.add_scalar(key, value, state.global_step)
        if "epoch" in logs:
            writer.add_scalar("train/epoch", float(logs["epoch"]), state.global_step)
        writer.flush()

    def record_end(
        self,
        status: str,
        values: list[float] | None,
        best_step: int | None,
        error: str | None,
        data: dict[str, Any],
    ) -> None:
        if self.writer is None and status == "paused":
            return
        writer = self._writer()
        step = best_step if best_step is not None else self.global_step
        if status == "completed" and values:
            for tag, value in zip(value_tags(self.objectives, len(values)), values, strict=True):
                writer.add_scalar(tag, value, step)
        pruned_step = (data or {}).get("pruned_step")
        if status == "pruned" and pruned_step is not None:
            writer.add_scalar("hpo/pruned_step", pruned_step, pruned_step)
        if status in SESSION_STATUS:
            hparams_module().write_session_end(writer, SESSION_STATUS[status])
        if error:
            writer.add_text("hpo/error", error, self.global_step)
        writer.close()
        self.writer = None
