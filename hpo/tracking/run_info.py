"""Who a tracked run is: the identity the store, wandb and the export use."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from hpo.tracking.store.schema import trial_run_id


@dataclass
class RunInfo:
    """One `hpo train` run (kind "run") or one study trial (kind "trial").

    `run_id` is derived when left empty: "<study_name>/trial-<trial_number>" for a trial, "run/<name>-<unix time>" for
    a run. `slot` and `devices` say where it ran (e.g. slot "1", devices "2,3" or "cpu").
    """

    run_id: str = ""
    kind: str = "trial"
    study_name: str | None = None
    trial_number: int | None = None
    name: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    output_dir: str = ""
    slot: str | None = None
    devices: str | None = None
    # The trial's user attributes about where it comes from (requeued_from_trial, retry_reason, resume_from): a
    # retried trial records a "retried" event, and its crashed predecessor is marked failed.
    origin: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in ("trial", "run"):
            raise ValueError(f"RunInfo.kind must be 'trial' or 'run', not {self.kind!r}")
        if self.kind == "trial" and (self.study_name is None or self.trial_number is None):
            raise ValueError("RunInfo for a trial needs study_name and trial_number")
        if not self.name:
            self.name = f"trial-{self.trial_number}" if self.kind == "trial" else "run"
        if not self.run_id:
            self.run_id = (
                trial_run_id(self.study_name, self.trial_number)
                if self.kind == "trial"
                else (f"run/{self.name}-{int(time.time())}")
            )
        self.output_dir = str(self.output_dir)
        for attribute in ("slot", "devices"):
            value = getattr(self, attribute)
            if value is not None and not isinstance(value, str):
                setattr(
                    self,
                    attribute,
                    ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value),
                )

    @property
    def first_attempt(self) -> int | None:
        """The trial whose tracker runs (TensorBoard folder, MLflow run) this one continues: its retry chain's first
        trial (`retry_root`), else the trial itself; None for a run."""
        if self.kind != "trial":
            return None
        return self.origin.get("retry_root", self.origin.get("requeued_from_trial", self.trial_number))


ORIGIN_ATTRS = (
    "requeued_from_trial",
    "retry_root",
    "retry_reason",
    "retry_count",
    "resume_from",
    "oom_retry",
)


def origin_attrs(user_attrs: dict[str, Any]) -> dict[str, Any]:
    """The user attributes of a queued retry that say which trial it continues (see `hpo.storage.retry`)."""
    return {k: user_attrs[k] for k in ORIGIN_ATTRS if user_attrs.get(k) is not None}
