"""Pruning by callback: report the objective after each evaluation and stop the trial cleanly when Optuna says so.

Unlike an exception raised from inside the loop (transformers' way), stopping through `control.should_training_stop`
lets the Trainer finish its step, run every callback's `on_train_end` (trackers close their runs, loggers flush) and
return normally; the trial is then told PRUNED with the step at which it was pruned.

With its first report the trial writes its length in global steps (user attribute `max_steps`): the stop-type rungs
of `scheduler: {type: asha}` sit at fractions of it (hpo.storage.stop_rungs). With its first two it writes what it
cost to start: the seconds from its claim to its first report and from there to its second (an evaluation interval),
which bench/search/trial_costs.py compares with what its simulator charges (no rule reads them since round 17).

Under torch.distributed only rank 0 holds the Optuna trial. It decides, and the decision is broadcast through the
Trainer's strategy so that every rank stops at the same step and no collective is left waiting.

A storage outage does not stop training: a report the storage cannot take is kept, in order, and no pruning decision
is made while it is down (the pruner reads every trial from the storage); the kept reports are written first at the
next evaluation the storage answers, or at the end of training, and those still kept then go with the trial's outcome
to its worker, which writes them before it records the result (hpo.scheduling.worker.finish).
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

from hpo.storage.attempts import attempt_chain
from hpo.storage.outage import is_unreachable, no_waiting, root_cause
from hpo.storage.stop_rungs import EVALUATION_ATTR, FIRST_REPORT_ATTR, LENGTH_ATTR
from trainer import TrainerCallback

logger = logging.getLogger(__name__)

PARAMETER_COUNT_KEY = "eval_num_parameters"


class ObjectiveTracker(TrainerCallback):
    """Keeps every evaluation's metrics with its step, so a trial can be scored by its best or its last evaluation.

    Each record also holds `eval_num_parameters` (the model's parameter count), so a study can trade accuracy against
    model size (`metrics: [accuracy, num_parameters]`) without the task computing it."""

    def __init__(self, count_parameters: bool = True) -> None:
        self.evaluations: list[tuple[int, dict[str, float]]] = []
        self.count_parameters = count_parameters
        self.num_parameters: int | None = None

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if not metrics:
            return
        record = {k: _as_float(v) for k, v in metrics.items()}
        if self.count_parameters and self.num_parameters is None and kwargs.get("model") is not None:
            # ZeRO-3 leaves each rank a partition; `ds_numel` is the full size. FSDP2's DTensors report the full size.
            self.num_parameters = sum(getattr(p, "ds_numel", p.numel()) for p in kwargs["model"].parameters())
        if self.num_parameters is not None:
            record.setdefault(PARAMETER_COUNT_KEY, float(self.num_parameters))
        self.evaluations.append((state.global_step, record))

    def with_history(self, log_history: list[dict[str, Any]]) -> list[tuple[int, dict[str, float]]]:
        """The evaluations of the whole run: a run resumed from a checkpoint also has those logged before the
        checkpoint (its restored `state.log_history`), which this tracker, started after the resume, did not see."""
        first = self.evaluations[0][0] if self.evaluations else None
        earlier = []
        for entry in log_history:
            step = entry.get("step")
            if (
                step is None
                or (first is not None and step >= first)
                or not any(k.startswith("eval_") for k in entry)
            ):
                continue
            record = {k: _as_float(v) for k, v in entry.items() if k.startswith("eval_")}
            if self.num_parameters is not None:
                record.setdefault(PARAMETER_COUNT_KEY, float(self.num_parameters))
            earlier.append((int(step), record))
        return earlier + self.evaluations


class OptunaPruningCallback(TrainerCallback):
    """Reports `metric` (eval metrics dict key, e.g. `eval_accuracy`) to the trial at the global step of each evaluation.

    `objective` may instead be a callable(metrics) -> float (the `compute_objective` of `hyperparameter_search`).
    `trial` may be None on ranks other than 0; those ranks only receive the decision."""

    def __init__(self, trial: Any, metric: str | None = None, objective: Any = None) -> None:
        if (metric is None) == (objective is None):
            raise ValueError("OptunaPruningCallback needs exactly one of `metric` or `objective`")
        self.trial = trial
        self.metric = metric
        self.objective = objective
        self.pruned_step: int | None = None
        self.pruned_value: float | None = None
        self.kept: list[
            tuple[int, float]
        ] = []  # (step, value) reports the storage has not taken yet, in order
        self.kept_total = 0  # reports ever kept (for the log and the figures)
        self.looked_back = False  # a retry's restored evaluations compared with its chain's reports (once)
        # The trial's length in global steps, written with its first report: stop-type rungs sit at fractions of it
        # (hpo.storage.stop_rungs), and a study that trains by epochs knows it only once training starts.
        self.length: int | None = None
        self.length_written = False
        # What the trial cost to start (hpo.storage.stop_rungs.FIRST_REPORT_ATTR): the wall times of its first two
        # evaluations, and the two figures measured from them that the storage has not taken yet.
        self.evaluated_at: list[float] = []
        self.start_costs: dict[str, float] = {}

    def value_of(self, metrics: dict[str, Any]) -> float | None:
        if self.objective is not None:
            return _as_float(self.objective(dict(metrics)))
        return _as_float(metrics[self.metric]) if self.metric in metrics else None

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if self.pruned_step is not None or not metrics:
            return
        if not self.looked_back:
            self.looked_back = True
            self.kept[:0] = self.lost_before(state.log_history, state.global_step)
        value = self.value_of(metrics)
        self.length = int(state.max_steps) if state.max_steps else None
        self.measure_start_cost(time.time())
        decision = self._decide(state.global_step, value, kwargs.get("trainer"))
        if decision:
            self.pruned_step = state.global_step
            self.pruned_value = value
            control.should_training_stop = True

    def _decide(self, step: int, value: float | None, trainer: Any) -> bool:
        strategy = getattr(trainer, "strategy", None)
        is_zero = strategy is None or strategy.is_global_zero
        decision = False
        if is_zero and self.trial is not None and value is not None and math.isfinite(value):
            # A non-finite value is not reported: Optuna's pruners would compare NaN and decide nothing useful; a
            # non-finite objective fails the trial when it ends.
            decision = self._report(step, value)
        if strategy is not None and getattr(strategy, "world_size", 1) > 1:
            decision = bool(strategy.broadcast_object(decision, src=0))
        return decision

    def _report(self, step: int, value: float) -> bool:
        """Report (kept reports first) and ask the pruner; False, with the report kept, while the storage is down."""
        earlier = len(self.kept)
        self.kept.append((step, value))
        try:
            with no_waiting():  # training must not wait on the storage
                self.write_length()
                self.write_start_costs()
                self.write_kept()
                if earlier:
                    logger.warning(
                        "trial %s: storage answers; %d kept report(s) written", self._number, earlier
                    )
                return bool(self.trial.should_prune())
        except Exception as error:
            if not is_unreachable(error):
                raise
            if self.kept and self.kept[-1][0] == step:
                self.kept_total += 1
                if len(self.kept) == 1:
                    logger.warning(
                        "trial %s: reports kept until the storage answers (%s); no pruning decision meanwhile",
                        self._number,
                        root_cause(error),
                    )
            return False

    def lost_before(self, log_history: list[dict[str, Any]], step: int) -> list[tuple[int, float]]:
        """A retry's evaluations before `step` (restored from its checkpoint's log history) that no attempt of its
        configuration reported: the reports an earlier attempt kept through a storage outage and lost when its
        process was killed. Kept here, they are written with this attempt's first report. Nothing for a first attempt
        or while the storage is down (best effort: the chain's reports are read once)."""
        if getattr(self.trial, "user_attrs", {}).get("requeued_from_trial") is None:
            return []
        try:
            with no_waiting():
                reported = _chain_reports(self.trial.study, self.trial.number)
        except Exception as error:
            if not is_unreachable(error):
                raise
            return []
        lost = {}
        for entry in log_history:
            at = entry.get("step")
            if at is None or at >= step or at in reported or not any(k.startswith("eval_") for k in entry):
                continue
            value = self.value_of(entry)
            if value is not None and math.isfinite(value):
                lost[int(at)] = value
        if lost:
            logger.warning(
                "trial %s: %d report(s) an earlier attempt lost are written from its checkpoint (steps %s)",
                self._number,
                len(lost),
                sorted(lost),
            )
        return sorted(lost.items())

    @property
    def _number(self) -> Any:
        return getattr(self.trial, "number", "?")

    def measure_start_cost(self, now: float) -> None:
        """At the first two evaluations of a first attempt: seconds from the claim (the trial's start in the storage)
        to the first, and from the first to the second. A retry resumes from a checkpoint: its start says nothing of
        what starting a configuration costs."""
        if self.trial is None or len(self.evaluated_at) >= 2 or self.is_retry:
            return
        self.evaluated_at.append(now)
        if len(self.evaluated_at) == 2:
            self.start_costs[EVALUATION_ATTR] = now - self.evaluated_at[0]
            return
        started = getattr(self.trial, "datetime_start", None)
        if started is not None:  # stamped by Optuna in local time, as time.time() reads it back
            self.start_costs[FIRST_REPORT_ATTR] = now - started.timestamp()

    @property
    def is_retry(self) -> bool:
        return getattr(self.trial, "user_attrs", {}).get("requeued_from_trial") is not None

    def write_start_costs(self) -> None:
        while self.start_costs:
            key, seconds = next(iter(self.start_costs.items()))
            self.trial.set_user_attr(key, round(seconds, 4))
            self.start_costs.pop(key)

    def write_length(self) -> None:
        if self.length_written or not self.length:
            return
        self.trial.set_user_attr(LENGTH_ATTR, self.length)
        self.length_written = True

    def write_kept(self) -> None:
        """Write the kept reports, oldest first; each leaves the list only once written (a failure keeps the rest)."""
        while self.kept:
            step, value = self.kept[0]
            self.trial.report(value, step)
            self.kept.pop(0)

    def on_train_end(self, args, state, control, **kwargs):
        """A last try for the kept reports; what the storage still refuses goes with the outcome (`kept`)."""
        if not self.kept or self.trial is None:
            return
        try:
            with no_waiting():
                self.write_kept()
        except Exception as error:
            if not is_unreachable(error):
                raise


def _chain_reports(study: Any, number: int) -> set[int]:
    """The steps reported by trial `number` and the attempts it continues (`requeued_from_trial`, back to the first)."""
    return {
        step
        for t in attempt_chain(study.get_trials(deepcopy=False), number)
        for step in t.intermediate_values
    }


def _as_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
