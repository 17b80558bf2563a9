"""MLflow for studies: one parent run per study, one nested run per trial (or one run per `hpo train` run).

The tracking URI is `tracking.mlflow.tracking_uri`, else MLFLOW_TRACKING_URI, else `sqlite:///<output_dir>/mlflow.db`;
the experiment is `tracking.mlflow.experiment_name`, else the study's name. A trial's run (name `trial-<number>`,
a child of the study's run through MLflow's `mlflow.parentRunId` tag) gets the trial's parameters once, every log
record's numbers as metrics at the global step (sent in batches, at least every two seconds), and at the end the trial's `state` (tag), its `value` (metric, at the
best step; `value/<metric>` for several objectives) and, when pruned, `pruned_step`; its MLflow status is FINISHED
(completed or pruned), FAILED, KILLED (interrupted) or SCHEDULED (paused until a promotion). So MLflow's compare view
lines trials up by parameter and value. A trial resumed after a pause, or retried after a crash, continues the run of
its first attempt (found by its `hpo.attempt` tag), it does not start a second one.

Workers on several machines find the study's parent run by its tags; two that create one at once both see both and
keep the older (the younger's creator deletes its own), so one parent run remains.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hpo.spec import MLflowSpec
from hpo.storage.urls import sqlite_path
from hpo.tracking.logs import numeric_items
from hpo.tracking.run_info import RunInfo
from hpo.tracking.tensorboard_callback import value_tags
from hpo.tracking.trial_tracker import TrialTracker
from trainer.integrations.mlflow import import_mlflow, metric_name

logger = logging.getLogger(__name__)

# metrics go to the store in batches: at most this many, at least this often (MLflow takes 1000 metrics a batch)
BATCH_METRICS, BATCH_SECONDS = 500, 2.0
RUN_STATUS = {"completed": "FINISHED", "pruned": "FINISHED", "failed": "FAILED", "interrupted": "KILLED"}
PARENT_TAGS = ("hpo.study", "hpo.role")


@contextlib.contextmanager
def creation_lock(uri: str) -> Iterator[None]:
    """For a SQLite store, an exclusive lock on a file beside it while a client opens it: workers that create a new
    store at once ran MLflow's migrations side by side and failed their trials ("duplicate column name")."""
    path = sqlite_path(uri)
    if path is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def tracking_uri(settings: MLflowSpec, output_dir: str | Path) -> str:
    configured = settings.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
    return configured or f"sqlite:///{Path(output_dir).resolve() / 'mlflow.db'}"


def experiment_id(client: Any, name: str) -> str:
    """The experiment's id, created when missing (another worker may create it at the same moment)."""
    found = client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    try:
        return client.create_experiment(name)
    except Exception:  # created meanwhile by another worker
        return client.get_experiment_by_name(name).experiment_id


def study_parent_run(client: Any, experiment: str, study: str) -> str:
    """The study's one parent run: found by its tags, else created; of two created at once the older stays."""
    query = f"tags.`hpo.study` = '{study}' and tags.`hpo.role` = 'study'"

    def existing() -> list[Any]:
        runs = client.search_runs([experiment], query, order_by=["attributes.start_time ASC"], max_results=10)
        return sorted(runs, key=lambda r: (r.info.start_time, r.info.run_id))

    runs = existing()
    if runs:
        return runs[0].info.run_id
    mine = client.create_run(
        experiment, run_name=study, tags={"hpo.study": study, "hpo.role": "study"}
    ).info.run_id
    oldest = existing()[0].info.run_id
    if oldest != mine:
        client.delete_run(mine)
    return oldest


class MLflowTrialCallback(TrialTracker):
    def __init__(
        self, settings: MLflowSpec, run: RunInfo, *, output_dir: str | Path, objectives: list[str]
    ) -> None:
        super().__init__()
        self.settings = settings
        self.run = run
        self.uri = tracking_uri(settings, output_dir)
        self.experiment_name = settings.experiment_name or run.study_name or run.name
        self.objectives = list(objectives)
        self.client: Any = None
        self.run_id: str | None = None
        self.buffer: list[Any] = []  # metrics not yet sent
        self.sent_at = time.monotonic()
        self.pending: list[Any] = []  # batches sent without waiting: waited for at the end
        self.disabled = False  # the store could not be reached: this run goes untracked in MLflow

    @property
    def attempt(self) -> str:
        """The run this training continues: the first attempt of a retried trial, the trial itself otherwise."""
        if self.run.kind != "trial":
            return self.run.run_id
        return f"{self.run.study_name}/trial-{self.run.first_attempt}"

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero and self.run_id is None and not self.disabled:
            self._start()

    def _start(self) -> None:
        try:
            self._open_run()
        except Exception as error:  # a tracking store that fails costs the MLflow run, never the trial
            logger.warning(
                "MLflow run for %s not started: %s: %s", self.run.run_id, type(error).__name__, error
            )
            self.disabled, self.run_id = True, None

    def _open_run(self) -> None:
        mlflow = import_mlflow()
        with creation_lock(self.uri):  # the first client creates the store's tables: one process at a time
            self.client = mlflow.MlflowClient(self.uri)
            self.client.search_experiments(max_results=1)
        experiment = experiment_id(self.client, self.experiment_name)
        found = self.client.search_runs([experiment], f"tags.`hpo.attempt` = '{self.attempt}'", max_results=1)
        if found:  # resumed or retried: the same run goes on
            self.run_id = found[0].info.run_id
            self.client.update_run(self.run_id, status="RUNNING")
            return
        tags = {"hpo.attempt": self.attempt, "hpo.run_id": self.run.run_id, **self.settings.tags}
        if self.run.kind == "trial":
            parent = study_parent_run(self.client, experiment, self.run.study_name)
            tags.update({"mlflow.parentRunId": parent, "hpo.study": self.run.study_name})
            tags["hpo.trial"] = str(self.run.trial_number)
        self.run_id = self.client.create_run(experiment, run_name=self.run.name, tags=tags).info.run_id
        params = [mlflow.entities.Param(k, str(v)) for k, v in self.run.params.items()]
        if params:
            self.client.log_batch(self.run_id, params=params)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.run_id is None or not logs:
            return
        from mlflow.entities import Metric  # loaded with mlflow by _start

        self.global_step = state.global_step
        now = int(time.time() * 1000)
        self.buffer += [
            Metric(metric_name(k), v, now, state.global_step) for k, v in numeric_items(logs).items()
        ]
        if len(self.buffer) >= BATCH_METRICS or time.monotonic() - self.sent_at >= BATCH_SECONDS:
            self._send()

    def _send(self) -> None:
        """The buffered metrics in one batch, not waited for: each batch is a transaction of the tracking store (about
        10 ms on SQLite), so one per log record would cost a small model's training several times over."""
        batch, self.buffer, self.sent_at = self.buffer, [], time.monotonic()
        if not batch:
            return
        try:
            self.pending.append(self.client.log_batch(self.run_id, metrics=batch, synchronous=False))
        except Exception as error:  # a tracking server that is down costs its records, never the trial
            logger.warning("MLflow: %d metrics not logged: %s", len(batch), error)

    def record_end(
        self,
        status: str,
        values: list[float] | None,
        best_step: int | None,
        error: str | None,
        data: dict[str, Any],
    ) -> None:
        if self.run_id is None:
            if self.train_ended or self.disabled or status == "paused" or os.environ.get("RANK", "0") != "0":
                return
            self._start()  # training never began (model_init or data raised): the trial still gets its run
            if self.run_id is None:
                return
        self._send()
        for operation in self.pending:
            operation.wait()
        self._record_end(status, values, best_step, error, data or {})

    def _record_end(
        self, status: str, values: list[float] | None, best_step: int | None, error: str | None, data: dict
    ) -> None:
        from mlflow.entities import Metric, RunTag

        now, step = int(time.time() * 1000), best_step if best_step is not None else self.global_step
        metrics, tags = [], [RunTag("state", status)]
        if status == "completed" and values:
            names = [t.removeprefix("hpo/") for t in value_tags(self.objectives, len(values))]
            metrics += [Metric(name, value, now, step) for name, value in zip(names, values, strict=True)]
        if data.get("pruned_step") is not None:
            metrics.append(Metric("pruned_step", data["pruned_step"], now, data["pruned_step"]))
        if error:
            tags.append(RunTag("error", error[:5000]))
        self.client.log_batch(self.run_id, metrics=metrics, tags=tags)
        if status == "paused":
            self.client.update_run(self.run_id, status="SCHEDULED")
        else:
            self.client.set_terminated(self.run_id, status=RUN_STATUS.get(status, "FINISHED"))
