"""Sections shared by run and study files, and the study's resource section.

`tracking:` (experiment store and wandb), `export:`, `resources:`, `study.keep_checkpoints`. Their behaviour is built
by the tracking, export and scheduling code; the schema here fixes their names, types, ranges and defaults.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from hpo.spec.base import Section
from hpo.spec.errors import FieldProblem


class WandbSpec(Section):
    project: str | None = None
    entity: str | None = None
    # None: online when an API key is configured, offline otherwise.
    mode: Literal["online", "offline", "disabled"] | None = None
    tags: list[str] = []


class TrackingSpec(Section):
    # The experiment store (runs, metrics, events, artifacts): on (default location), off, or a path or database URL.
    store: bool | str = True
    wandb: WandbSpec | None = None  # no wandb run unless this section is present


class ExportSpec(Section):
    out_dir: str | None = None  # where `hpo export` writes when --out is not given
    metric: str | None = None  # which objective picks the trial from a Pareto front (several objectives)


class ResourcesSpec(Section):
    gpus_per_trial: int = Field(1, ge=1)
    trials_per_gpu: int = Field(1, ge=1)
    threads_per_trial: int | None = Field(None, ge=1)
    workers: int | None = Field(None, ge=1)
    max_retries: int = Field(2, ge=0)
    retry_on_exception: bool = False
    heartbeat_interval: float = Field(10.0, gt=0)
    grace_period: float = Field(60.0, gt=0)

    @model_validator(mode="after")
    def _check(self) -> ResourcesSpec:
        if self.gpus_per_trial > 1 and self.trials_per_gpu > 1:
            raise FieldProblem("trials_per_gpu", "packing several trials on a GPU needs gpus_per_trial: 1")
        if self.grace_period <= self.heartbeat_interval:
            raise FieldProblem(
                "grace_period",
                f"must be longer than heartbeat_interval ({self.heartbeat_interval} s), or a live trial looks stale",
            )
        return self


class KeepCheckpointsSpec(Section):
    # Keep the best checkpoint of the top_k trials (plus running ones); null keeps every checkpoint.
    top_k: int | None = Field(1, ge=0)
