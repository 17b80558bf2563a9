"""Trials per hour with 1 and 2 scheduler workers, the start-up cost of a trial, and transformers' hyperparameter_search.

    python bench/overhead/scheduling.py                      # 16 trials of 300 steps per contender
    python bench/overhead/scheduling.py --trials 12 --steps 400

One study (bench/overhead/scheduling_task.py: a 64-384-384-10 MLP on generated data, batch 64, an evaluation every 100 steps, no
checkpoints, random sampling of the learning rate, no pruning) is run three ways in this one invocation:
- `hpo` with 1 worker: each trial in a fresh process forked from the warm worker, one thread;
- `hpo` with 2 workers: two trials at a time, one thread each (the 2 cores of this machine);
- transformers' `Trainer.hyperparameter_search` (Optuna backend): one trial after another in this process, one thread.
Throughput is trials per hour over the span from the first trial's start to the last trial's end (from the storage's
timestamps); "wall" adds the study's set-up (worker start, the dry run). The per-trial overhead is the time from the
claim of a trial (stale check, claim lock, ask) to its first training step, as the worker records it (`startup_s`); for
transformers, from the trial's hp_space call to its first step. Targets: 2 workers >= 1.8x one; overhead < 1 s.
Other processes on the machine slow every contender alike only if they stay steady: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scheduling_task  # noqa: E402

LR_LOW, LR_HIGH = 1e-4, 1e-2


@dataclass
class Result:
    name: str
    trials: int
    span_s: float
    wall_s: float
    overheads: list[float]
    durations: list[float]
    workers: int = 1

    @property
    def per_hour(self) -> float:
        return self.trials / self.span_s * 3600

    @property
    def busy(self) -> float:
        """Fraction of the span the slots spent inside trials (1.0: no gap between trials)."""
        return sum(self.durations) / (self.span_s * self.workers)

    @property
    def mean_duration(self) -> float:
        return statistics.mean(self.durations)

    @property
    def overhead(self) -> float:
        return statistics.median(self.overheads) if self.overheads else float("nan")


def training(steps: int) -> dict:
    return {
        "max_steps": steps,
        "per_device_train_batch_size": 64,
        "per_device_eval_batch_size": 512,
        "eval_strategy": "steps",
        "eval_steps": 100,
        "logging_steps": 100,
        "save_strategy": "no",
        "disable_tqdm": True,
    }


def write_study(folder: Path, name: str, trials: int, steps: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(Path(scheduling_task.__file__), folder / "scheduling_task.py")
    spec = {
        "study": {
            "name": name,
            "output_dir": str(folder / "out"),
            "metric": "accuracy",
            "direction": "maximize",
            "n_trials": trials,
            "sampler": {"type": "random", "seed": 0},
            "pruner": {"type": "none"},
        },
        "task": {
            "model_init": "scheduling_task:model_init",
            "data": "scheduling_task:data",
            "compute_metrics": "scheduling_task:compute_metrics",
        },
        "training": training(steps),
        "search_space": {"learning_rate": {"type": "float", "low": LR_LOW, "high": LR_HIGH, "log": True}},
        "resources": {"threads_per_trial": 1},
        "tracking": {"store": False},
    }
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def run_hpo(root: Path, workers: int, trials: int, steps: int) -> Result:
    import optuna

    from hpo.study.manager import run_study

    path = write_study(root / f"hpo-{workers}", f"bench-{workers}", trials, steps)
    started = time.perf_counter()
    run_study(path, workers=workers)
    wall = time.perf_counter() - started
    study = optuna.load_study(
        study_name=f"bench-{workers}", storage=f"sqlite:///{path.parent / 'out' / 'study.db'}"
    )
    done = [t for t in study.trials if t.state.is_finished()]
    if len(done) != trials or any(t.state.name != "COMPLETE" for t in done):
        print(f"warning: {[t.state.name for t in done]}", file=sys.stderr)
    span = (max(t.datetime_complete for t in done) - min(t.datetime_start for t in done)).total_seconds()
    overheads = [t.user_attrs["startup_s"] for t in done if "startup_s" in t.user_attrs]
    durations = [(t.datetime_complete - t.datetime_start).total_seconds() for t in done]
    name = f"hpo, {workers} worker{'s' if workers > 1 else ''}"
    return Result(name, len(done), span, wall, overheads, durations, workers)


def run_transformers(root: Path, trials: int, steps: int) -> Result:
    import optuna
    import torch
    from transformers import Trainer, TrainerCallback, TrainingArguments

    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    logging.getLogger("transformers").setLevel(logging.ERROR)
    marks: dict[str, list[float]] = {"asked": [], "first_step": [], "ended": []}

    class FirstStep(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if len(marks["first_step"]) < len(marks["asked"]):
                marks["first_step"].append(time.perf_counter())

        def on_train_end(self, args, state, control, **kwargs):
            marks["ended"].append(time.perf_counter())

    def hp_space(trial):
        marks["asked"].append(time.perf_counter())
        return {"learning_rate": trial.suggest_float("learning_rate", LR_LOW, LR_HIGH, log=True)}

    train, evaluation = scheduling_task.data()
    arguments = TrainingArguments(output_dir=str(root / "hf"), report_to="none", seed=0, **training(steps))
    trainer = Trainer(
        model_init=lambda: scheduling_task.model_init({}),
        args=arguments,
        train_dataset=train,
        eval_dataset=evaluation,
        compute_metrics=scheduling_task.compute_metrics,
        callbacks=[FirstStep()],
    )
    started = time.perf_counter()
    trainer.hyperparameter_search(
        hp_space=hp_space,
        n_trials=trials,
        direction="maximize",
        backend="optuna",
        compute_objective=lambda metrics: metrics["eval_accuracy"],
    )
    wall = time.perf_counter() - started
    span = wall - (marks["asked"][0] - started)
    overheads = [b - a for a, b in zip(marks["asked"], marks["first_step"], strict=False)]
    durations = [b - a for a, b in zip(marks["asked"], marks["ended"], strict=False)]
    return Result("transformers hyperparameter_search", trials, span, wall, overheads, durations)


def report(results: list[Result]) -> None:
    header = (
        f"{'contender':<36} {'trials':>6} {'span s':>7} {'wall s':>7} {'trials/h':>9} {'ask->step s':>12}"
    )
    print(f"\n{header} {'trial s':>8} {'slots busy':>10}")
    for r in results:
        print(
            f"{r.name:<36} {r.trials:>6} {r.span_s:>7.1f} {r.wall_s:>7.1f} {r.per_hour:>9.0f} {r.overhead:>12.3f} "
            f"{r.mean_duration:>8.2f} {r.busy:>10.0%}"
        )
    one, two, hf = results
    scaling = two.per_hour / one.per_hour
    print(
        f"\n2 workers / 1 worker: {scaling:.2f}x trials per hour (target >= 1.8x: {'met' if scaling >= 1.8 else 'MISSED'})"
    )
    print(
        f"  = 2 x slots busy ({two.busy:.0%} vs {one.busy:.0%}) x trial time 1 worker / 2 workers "
        f"({one.mean_duration / two.mean_duration:.2f}: below 1 when other processes take the second core)"
    )
    print(f"hpo 1 worker / transformers: {one.per_hour / hf.per_hour:.2f}x trials per hour")
    print(f"hpo 2 workers / transformers: {two.per_hour / hf.per_hour:.2f}x trials per hour")
    met = "met" if one.overhead < 1.0 and two.overhead < 1.0 else "MISSED"
    print(
        f"per-trial overhead, ask to first step (median): hpo {one.overhead:.3f} s / {two.overhead:.3f} s "
        f"(1 / 2 workers; target < 1 s: {met}); transformers {hf.overhead:.3f} s (in-process, no isolation)"
    )


# ---- storage under load (--storage-load) ----------------------------------------------------------------------------
STORAGE_WORKERS, STORAGE_TRIALS = 4, 100


def _storage(kind: str, path: Path):
    from optuna.storages import RDBStorage
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    from hpo.storage.database import create_storage

    heartbeat = {"heartbeat_interval": 1, "grace_period": 10}
    if kind == "optuna sqlite":
        return RDBStorage(f"sqlite:///{path}", **heartbeat)
    if kind == "hpo sqlite":
        return create_storage(f"sqlite:///{path}", **heartbeat)
    return JournalStorage(JournalFileBackend(str(path) + ".log"))  # no heartbeats: stale trials stay RUNNING


def _storage_worker(kind: str, path: Path, queue) -> None:
    import optuna

    def objective(trial):
        x = trial.suggest_float("x", -10, 10)
        for step in range(3):
            trial.report(x * x, step)
        return x * x

    errors = []
    study = optuna.load_study(
        study_name="s", storage=_storage(kind, path), sampler=optuna.samplers.RandomSampler()
    )
    for _ in range(STORAGE_TRIALS):
        try:
            study.optimize(objective, n_trials=1)  # with heartbeats on the RDB storages, as Optuna runs them
        except Exception as error:  # noqa: BLE001 - counted, e.g. "database is locked"
            errors.append(str(error)[:100])
    queue.put(errors)


def storage_load(root: Path) -> None:
    """4 processes x 100 trials of a plain objective on each storage: errors and trials per second."""
    import multiprocessing
    import warnings

    import optuna

    warnings.filterwarnings("ignore")
    optuna.logging.set_verbosity(optuna.logging.CRITICAL)
    print(f"\nstorage under load: {STORAGE_WORKERS} processes x {STORAGE_TRIALS} trials, heartbeat 1 s")
    for kind in ("optuna sqlite", "hpo sqlite", "journal file"):
        path = root / f"{kind.replace(' ', '-')}.db"
        optuna.create_study(study_name="s", storage=_storage(kind, path))
        context = multiprocessing.get_context("fork")
        queue = context.Queue()
        started = time.perf_counter()
        workers = [
            context.Process(target=_storage_worker, args=(kind, path, queue)) for _ in range(STORAGE_WORKERS)
        ]
        for worker in workers:
            worker.start()
        errors = [e for _ in workers for e in queue.get()]
        for worker in workers:
            worker.join()
        seconds = time.perf_counter() - started
        done = len(
            optuna.load_study(study_name="s", storage=_storage(kind, path)).get_trials(
                states=(optuna.trial.TrialState.COMPLETE,)
            )
        )
        print(
            f"{kind:<14} complete {done:>4}  errors {len(errors):>3}  {done / seconds:>6.1f} trials/s  {sorted(set(errors))[:2]}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--storage-load", action="store_true", help="also: SQLite storages under 4 processes")
    options = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="hpo-bench-scheduling-") as folder:
        root = Path(folder)
        results = [
            run_hpo(root, 1, options.trials, options.steps),
            run_hpo(root, 2, options.trials, options.steps),
            run_transformers(root, options.trials, options.steps),
        ]
    report(results)
    if options.storage_load:
        with tempfile.TemporaryDirectory(prefix="hpo-bench-storage-") as folder:
            storage_load(Path(folder))
    print(f"load average after: {os.getloadavg()[0]:.1f} (above ~2 means other processes shared these cores)")


if __name__ == "__main__":
    main()
