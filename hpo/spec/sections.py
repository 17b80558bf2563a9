"""Sections shared by run and study files, and the study's resource section.

`tracking:` (experiment store and wandb), `export:`, `resources:`, `study.keep_checkpoints`. Their behaviour is built
by the tracking, export and scheduling code; the schema here fixes their names, types, ranges and defaults.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from hpo.spec.base import Section
from hpo.spec.errors import FieldProblem
from trainer.report_to import missing_package


class WandbSpec(Section):
    project: str | None = None
    entity: str | None = None
    # None: online when an API key is configured, offline otherwise.
    mode: Literal["online", "offline", "disabled"] | None = None
    tags: list[str] = []


class TensorBoardSpec(Section):
    # One run folder per trial (per run) under this folder; default <output_dir>/tensorboard
    log_dir: str | None = None


class MLflowSpec(Section):
    # default: MLFLOW_TRACKING_URI, else sqlite:///<output_dir>/mlflow.db
    tracking_uri: str | None = None
    experiment_name: str | None = None  # default: the study's (the run's) name
    tags: dict[str, str] = {}


class TrackingSpec(Section):
    # The experiment store (runs, metrics, events, artifacts): on (default location), off, or a path or database URL.
    store: bool | str = True
    wandb: WandbSpec | None = None  # no wandb run unless this section is present
    tensorboard: TensorBoardSpec | None = None  # no TensorBoard events unless this section is present
    mlflow: MLflowSpec | None = None  # no MLflow run unless this section is present

    switches = {
        "wandb": "wandb with its defaults",
        "tensorboard": "TensorBoard with its defaults",
        "mlflow": "MLflow with its defaults",
    }

    @model_validator(mode="after")
    def _installed(self) -> TrackingSpec:
        for name in ("tensorboard", "mlflow"):
            missing = missing_package(name) if getattr(self, name) is not None else None
            if missing is not None:
                raise FieldProblem(name, f"{missing}; or remove tracking.{name}")
        return self

    def integrations(self) -> list[str]:
        """The report_to names this section turns on."""
        return [name for name in ("mlflow", "tensorboard", "wandb") if getattr(self, name) is not None]


class ExportSpec(Section):
    out_dir: str | None = None  # where `hpo export` writes when --out is not given
    metric: str | None = None  # which objective picks the trial from a Pareto front (several objectives)


class ResourcesSpec(Section):
    """Where and how each trial runs (`hpo.scheduling.slots` turns this into worker slots).

    gpus_per_trial: k GPUs per trial; with k > 1 a trial is a k-rank job (one rank per GPU) under `strategy`.
    trials_per_gpu: trials packed on one GPU (needs gpus_per_trial: 1). A number N: at most N at a time; `auto`: as many
        as the GPU's memory and the CPU cores allow (each trial needs at least threads_per_trial cores, default 1).
        Beyond the first, a trial starts on a GPU only when NVML shows free memory for the study's largest measured
        peak (scaled by the batch size or sequence length when the next trial's is larger) plus a margin; until one
        trial of the study has been measured (ended, or two steps taken on the GPU) the first runs alone. A trial
        that runs out of GPU memory while sharing is queued again (from its checkpoint, to run alone), not failed. See
        `hpo.scheduling.gpu_gate`.
    ranks_per_trial: processes per trial. On CPU (no GPU, or --workers) it makes each trial an n-rank gloo job under
        `strategy`; on GPUs each rank drives one GPU, so leave it unset or equal to gpus_per_trial.
    strategy: ddp (default) | fsdp | deepspeed: how the ranks of a multi-rank trial share the work. A
        `training.strategy` other than auto wins; the two may not disagree when both are given.
    threads_per_trial: torch threads per rank. Default: the CPU cores this process may use divided by the ranks that
        run at once (workers x ranks per trial; on GPUs, slots x gpus per trial), at least 1; e.g. 2 cores and
        `--workers 2` give 1 thread each. Small models often train faster on 1 thread (set threads_per_trial: 1):
        threads beyond what the model can use only wait on each other, worse on a machine other jobs share.
        `hpo run --in-process` applies it too.
    workers: trials in parallel on CPU (--workers wins). Default: the usable cores // (threads_per_trial x ranks per
        trial) when threads_per_trial is set (the cores filled, as Ray Tune does), else 1 (one trial on every core).
    max_retries / retry_on_exception: how often a crashed trial is queued again (from its checkpoint), and whether an
        ordinary exception counts as a crash. heartbeat_interval / grace_period: seconds between a running trial's
        heartbeats, and without one before it counts as crashed.
    fresh_process_per_trial: on the CPU a worker's trial process, once it has sent its result, stays and runs the
        worker's next trial (no fork, no exit, no cold start: a trial's start and first steps cost about a third less
        CPU, bench/peers/gap.py). Every trial still builds its own model, optimizer and Trainer, seeded as in a new process,
        and a crash takes down one trial, whose retry gets a new process. Set true when the task's code keeps state
        between trials in its own module (a cache, a counter, data changed in place): each trial then gets a new
        process forked from the worker. Trials on GPUs and multi-rank trials always get new processes (the memory goes
        back to the GPU).
    """

    gpus_per_trial: int = Field(1, ge=1)
    trials_per_gpu: int | Literal["auto"] = 1
    ranks_per_trial: int | None = Field(None, ge=1)
    strategy: Literal["ddp", "fsdp", "deepspeed"] = "ddp"
    threads_per_trial: int | None = Field(None, ge=1)
    workers: int | None = Field(None, ge=1)
    max_retries: int = Field(2, ge=0)
    retry_on_exception: bool = False
    heartbeat_interval: float = Field(10.0, gt=0)
    grace_period: float = Field(60.0, gt=0)
    fresh_process_per_trial: bool = False

    @field_validator("trials_per_gpu", mode="before")
    @classmethod
    def _trials_per_gpu(cls, value: object) -> object:
        # One message for both forms (pydantic's union error would list one line per alternative).
        if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            return value
        raise ValueError(f"must be a whole number of at least 1, or auto (got {value!r})")

    @model_validator(mode="after")
    def _check(self) -> ResourcesSpec:
        if self.gpus_per_trial > 1 and self.trials_per_gpu != 1:
            raise FieldProblem("trials_per_gpu", "packing several trials on a GPU needs gpus_per_trial: 1")
        if (
            self.ranks_per_trial is not None
            and "gpus_per_trial" in self.model_fields_set
            and self.ranks_per_trial != self.gpus_per_trial
        ):
            raise FieldProblem(
                "ranks_per_trial",
                f"is {self.ranks_per_trial} but gpus_per_trial is {self.gpus_per_trial}; on GPUs each rank drives "
                "one GPU, so give gpus_per_trial alone (GPU) or ranks_per_trial alone (CPU ranks)",
            )
        if self.grace_period <= self.heartbeat_interval:
            raise FieldProblem(
                "grace_period",
                f"must be longer than heartbeat_interval ({self.heartbeat_interval} s), or a live trial looks stale",
            )
        return self

    @property
    def ranks(self) -> int:
        """Processes per trial: ranks_per_trial, else gpus_per_trial (1 unless several GPUs per trial)."""
        return self.ranks_per_trial or self.gpus_per_trial


class StorageSpec(Section):
    """How the study's storage is used (its URL is `study.storage`).

    outage_timeout: seconds the workers and `hpo run` wait for a storage that stopped answering (a database restart or
        failover, a SQLite file locked past its busy timeout, an object store for `study.output_dir: s3://`) before
        the run stops cleanly: trials save a checkpoint and stop, `hpo run` exits 75, and the same command continues.
        Default 900 (15 min): restarts and failovers take seconds to minutes; an outage longer than that is likely
        long enough that holding the GPUs idle costs more than a clean stop (hpo.storage.outage).
    """

    outage_timeout: float = Field(900.0, gt=0)


class KeepCheckpointsSpec(Section):
    # Keep the best checkpoint of the top_k trials (plus running ones); null keeps every checkpoint.
    top_k: int | None = Field(1, ge=0)
