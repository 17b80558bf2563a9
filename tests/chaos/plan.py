"""What one chaos run is: a study kind, a storage, workers, and the faults to inject (tests/chaos/campaign.py).

Everything here is drawn from one `random.Random(seed)`, so a run is replayed by its seed: the same study file, the same
faults in the same order, each at the same delay after the study's first trial started. (Which trial or worker a fault
hits depends on what is running at that moment, so the harness records its target as it happens.)
"""

from __future__ import annotations

import os
import random
import shutil
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

TASK = Path(__file__).resolve().parent / "task.py"
STUDY_KINDS = ("pruner", "asha", "pbt", "retry")
# Every fault the harness can inject; pg_restart and pg_outage only on PostgreSQL, s3_outage only with the output
# folder in an object store.
FAULT_KINDS = (
    "kill_trial",  # SIGKILL of one trial process
    "kill_worker",  # SIGKILL of one worker process
    "kill_run",  # SIGKILL of `hpo run` and every process under it
    "stop_worker",  # SIGSTOP of a worker for longer than the grace period, then SIGCONT
    "preempt",  # SIGTERM to `hpo run` (a preemption), then the same command again
    "exception",  # model_init, data or compute_metrics raises once
    "disk_full",  # an `hpo worker` beside the run whose writes fail (RLIMIT_FSIZE)
    "pg_restart",  # the PostgreSQL server restarts mid-study
    "pg_outage",  # the PostgreSQL server stops for OUTAGE_S (a maintenance window, a failover) and starts again
    "s3_outage",  # the object store stops answering for OUTAGE_S (study.output_dir: s3://...), then answers again
    "damage_checkpoint",  # a checkpoint file truncated or deleted, or a whole checkpoint deleted
    "second_run",  # a second `hpo run` of the same study, at the same time
)
EXCEPTION_SITES = ("model_init", "data", "compute_metrics")
HEARTBEAT_S, GRACE_S = 1.0, 3.0
MAX_FAULT_DELAY_S = 1.5  # each fault lands 0.2 s to this long after the one before it
OUTAGE_S = (
    30.0,
    300.0,
)  # how long a long outage lasts: a restart with recovery to a failover or a maintenance window
POSTGRES_ONLY = ("pg_restart", "pg_outage")
OUTAGES = ("pg_outage", "s3_outage")


def time_scale() -> float:
    """How many times slower than an idle machine this one runs now: $HPO_CHAOS_TIME_SCALE, else the 1-minute load
    average per core (at least 1). Every wait of the harness and the studies' heartbeat grace period are multiplied by
    it: on a loaded CI machine a heartbeat thread or a trial's start lags seconds behind, and fixed limits then report
    slowness as a stuck study (the chaos suite failed CI so, under load, with nothing lost)."""
    given = os.environ.get("HPO_CHAOS_TIME_SCALE")
    if given:
        return max(1.0, float(given))
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


@dataclass
class Fault:
    kind: str
    delay: float  # seconds after the study's first running trial (or after the previous fault)
    detail: str = ""  # the site of an exception, a damage mode, a file size limit
    target: str = ""  # filled when injected: what it hit
    injected: bool = False


@dataclass
class Scenario:
    seed: int
    study: str
    postgres: bool
    workers: int
    extra_worker: bool  # an `hpo worker` beside `hpo run` from the start
    faults: list[Fault] = field(default_factory=list)
    object_store: bool = (
        False  # study.output_dir in the S3 API on loopback (through the harness's OutageProxy)
    )

    def describe(self) -> dict[str, Any]:
        return asdict(self)

    def outage_s(self) -> float:
        """The seconds of long outage its faults hold: a study waits them out, so its deadline grows by as much."""
        return sum(float(f.detail) for f in self.faults if f.kind in OUTAGES)


def draw_scenario(
    seed: int,
    fault_kinds: list[str],
    faults: int,
    postgres: bool,
    studies: tuple[str, ...] = STUDY_KINDS,
    object_store: bool = False,
) -> Scenario:
    rng = random.Random(seed)
    study = rng.choice(studies)
    on_postgres = postgres and rng.random() < 0.5
    on_store = object_store and rng.random() < 1 / 3
    kinds = [
        k for k in fault_kinds if (k not in POSTGRES_ONLY or on_postgres) and (k != "s3_outage" or on_store)
    ]
    scenario = Scenario(
        seed=seed,
        study=study,
        postgres=on_postgres,
        workers=rng.randint(1, 3),
        extra_worker=rng.random() < 0.25,
        object_store=on_store,
    )
    for _ in range(faults):
        kind = rng.choice(kinds) if kinds else "kill_trial"
        # Within the study's few seconds: a chaos study now ends 3-4 s after its first trial starts (it took twice
        # that before the trial processes got faster), and a fault drawn later has nothing left to hit.
        scenario.faults.append(Fault(kind, round(rng.uniform(0.2, MAX_FAULT_DELAY_S), 2), _detail(kind, rng)))
    return scenario


def _detail(kind: str, rng: random.Random) -> str:
    if kind == "exception":
        return rng.choice(EXCEPTION_SITES)
    if kind == "damage_checkpoint":
        return rng.choice(("truncate", "delete_file", "delete_folder"))
    if kind in OUTAGES:
        return str(round(rng.uniform(*OUTAGE_S)))  # seconds the server stays down
    if kind == "disk_full":
        return str(rng.choice((4, 16, 64)) * 1024)  # bytes a file may grow to
    return ""


# ---- study files ------------------------------------------------------------------------------------------------------
def n_trials_of(scenario: Scenario) -> int:
    return {"pruner": 5, "asha": 6, "pbt": 4, "retry": 4}[scenario.study]


def write_study(
    folder: Path, scenario: Scenario, storage: str | None, scale: float = 1.0, bucket: str | None = None
) -> Path:
    """The study file of `scenario` in `folder`, with the chaos task beside it. Short heartbeats: a stopped worker's
    trial is found stale within seconds (`scale` times GRACE_S: see `time_scale`)."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(TASK, folder / "chaos_task.py")
    spec: dict[str, Any] = {
        "study": {
            # On a shared PostgreSQL server a study name must be new to each run: the same seed may run again.
            "name": f"chaos-{scenario.seed}" + (f"-{uuid.uuid4().hex[:8]}" if storage else ""),
            "output_dir": f"s3://{bucket}/{folder.name}-{uuid.uuid4().hex[:8]}"
            if bucket
            else str(folder / "out"),
            "metric": "accuracy",
            "direction": "maximize",
            "n_trials": n_trials_of(scenario),
            "sampler": {"type": "random", "seed": scenario.seed},
        },
        "task": {
            "model_init": "chaos_task:model_init",
            "data": "chaos_task:data",
            "compute_metrics": "chaos_task:compute_metrics",
        },
        "training": {
            "max_steps": 24,
            "per_device_train_batch_size": 32,
            "per_device_eval_batch_size": 128,
            "learning_rate": 0.01,
            "eval_strategy": "steps",
            "eval_steps": 4,
            "save_strategy": "steps",
            "save_steps": 4,
            "logging_steps": 4,
            "disable_tqdm": True,
        },
        "search_space": {"learning_rate": {"type": "float", "low": 1.0e-3, "high": 0.3, "log": True}},
        "resources": {
            "heartbeat_interval": HEARTBEAT_S,
            "grace_period": round(GRACE_S * scale, 1),
            "threads_per_trial": 1,
        },
    }
    if storage:
        spec["study"]["storage"] = storage
    _shape(spec, scenario.study)
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _shape(spec: dict[str, Any], study: str) -> None:
    """What makes each kind of study itself."""
    if study == "pruner":
        spec["study"]["pruner"] = {"type": "median", "n_startup_trials": 1, "n_warmup_steps": 4}
    elif study == "asha":
        spec["study"]["scheduler"] = {
            "type": "asha",
            "min_resource": 4,
            "max_resource": 16,
            "reduction_factor": 2,
        }
        spec["training"]["max_steps"] = 16
    elif study == "pbt":
        spec["study"].pop("n_trials")
        spec["study"]["scheduler"] = {
            "type": "pbt",
            "population": 4,
            "perturbation_interval": 4,
            # 6 intervals: with the warm member process, 3 ended the study before a second fault could land
            "max_resource": 24,
            "quantile_fraction": 0.25,
            "resample_probability": 0.0,
            "mutations": {"learning_rate": {"factors": [0.5, 2.0]}},
        }
        spec["training"].update(max_steps=None, lr_scheduler_type="linear")
    elif study == "retry":
        spec["resources"].update(retry_on_exception=True, max_retries=2)
