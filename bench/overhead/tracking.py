"""Cost of tracking on the training loop, per log record: the digits MLP logging at every step (the worst case) with
no tracking, with hpo's trackers (the experiment store, offline wandb, a study's TensorBoard and MLflow runs) and with
each `report_to` integration of the Trainer (tensorboard, mlflow on a local SQLite store, offline wandb). Prints,
against the untracked baseline measured in the same invocation: the long run's time ratio, the cost of one log record
(the slope between a short and a long run, so a tracker's start-up is not counted in it) and that start-up.

    OMP_NUM_THREADS=1 python bench/overhead/tracking.py [--steps 300] [--repeats 3] [--only "report_to mlflow"]

Start-up includes `wandb.init` (about a second), MLflow's run creation and each run's final flush. MLflow's SQLite
store is created once per variant in the warm-up (its migrations take seconds, once per store, not per run).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from hpo.spec import MLflowSpec, TensorBoardSpec
from hpo.tracking import RunInfo, build_tracking_callbacks, finish_tracking
from studies.tasks import digits
from trainer import PrinterCallback, Trainer, TrainingArguments

NO_TRACKERS = {"store": False, "wandb": None, "tensorboard": None, "mlflow": None}
# name -> (hpo's tracking section, the Trainer's report_to)
VARIANTS: dict[str, tuple[dict[str, Any] | None, str]] = {
    "no tracking": (None, "none"),
    "experiment store": ({**NO_TRACKERS, "store": True}, "none"),
    "store + wandb offline": (
        {
            **NO_TRACKERS,
            "store": True,
            "wandb": SimpleNamespace(project="bench", mode="offline", entity=None, tags=[]),
        },
        "none",
    ),
    "study tensorboard": ({**NO_TRACKERS, "tensorboard": TensorBoardSpec()}, "none"),
    "study mlflow": ({**NO_TRACKERS, "mlflow": "study"}, "none"),
    "report_to tensorboard": (None, "tensorboard"),
    "report_to mlflow": (None, "mlflow"),
    "report_to wandb": (None, "wandb"),
}


def timed_run(folder: Path, steps: int, tracking: dict[str, Any] | None, report_to: str) -> float:
    folder.mkdir(parents=True)
    os.environ["WANDB_DIR"] = str(folder)
    mlflow_store = f"sqlite:///{folder.parent / f'mlflow-{report_to}.db'}"  # one store per variant, kept
    if report_to == "mlflow":
        import mlflow

        mlflow.set_tracking_uri(mlflow_store)
    if tracking is not None and tracking["mlflow"] == "study":
        tracking = {**tracking, "mlflow": MLflowSpec(tracking_uri=mlflow_store)}
    args = TrainingArguments(
        output_dir=str(folder), max_steps=steps, logging_steps=1, save_strategy="no", disable_tqdm=True, seed=0,
        report_to=report_to,
    )  # fmt: skip
    started = time.perf_counter()
    spec = SimpleNamespace(
        tracking=SimpleNamespace(**(tracking or NO_TRACKERS)), output_dir=str(folder), name="bench"
    )
    run = RunInfo(kind="run", name="bench", output_dir=str(folder))
    callbacks = [] if tracking is None else build_tracking_callbacks(spec, run=run)
    train, _ = digits.data()
    model = digits.model_init({"hidden_size": 64})
    trainer = Trainer(model=model, args=args, train_dataset=train, callbacks=callbacks)
    trainer.pop_callback(
        PrinterCallback
    )  # printing every record to the terminal would dwarf what is measured
    trainer.train()
    finish_tracking(callbacks, status="completed")  # includes the final flush: part of the run's cost
    if report_to == "wandb":
        import wandb

        wandb.finish()  # what the script's exit does
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated variant names (the baseline always runs)")
    args = parser.parse_args()
    for name, value in {
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }.items():
        os.environ.setdefault(name, value)
    chosen = {
        n: v for n, v in VARIANTS.items() if n == "no tracking" or not args.only or n in args.only.split(",")
    }
    long, short = args.steps, max(args.steps // 5, 1)
    times = {(name, steps): float("inf") for name in chosen for steps in (short, long)}
    with tempfile.TemporaryDirectory() as scratch:
        for name, (tracking, report_to) in chosen.items():  # imports and first-call costs out of the way
            timed_run(
                Path(scratch) / f"warmup-{len(name)}-{report_to}-{id(tracking)}", 5, tracking, report_to
            )
        # Interleaved repeats, best of each: the machine is shared, so single timings are noisy.
        for repeat in range(args.repeats):
            for i, (name, (tracking, report_to)) in enumerate(chosen.items()):
                for steps in (short, long):
                    seconds = timed_run(Path(scratch) / f"{repeat}-{i}-{steps}", steps, tracking, report_to)
                    times[name, steps] = min(times[name, steps], seconds)
    report(times, chosen, short, long, args.repeats)


def report(times: dict, chosen: dict, short: int, long: int, repeats: int) -> None:
    base_long, base_short = times["no tracking", long], times["no tracking", short]
    base_step = (base_long - base_short) / (long - short)
    print(f"digits MLP, a log record every step, 1 thread, best of {repeats}: {short} and {long} steps")
    print(f"  {'':24s} {long}-step run   ratio   per log record   start-up")
    for name in chosen:
        per_step = (times[name, long] - times[name, short]) / (long - short)
        startup = times[name, short] - per_step * short - (base_short - base_step * short)
        print(
            f"  {name:24s} {times[name, long]:8.2f} s   {times[name, long] / base_long:5.2f}x"
            f"   {1000 * (per_step - base_step):+8.2f} ms   {startup:+6.2f} s"
        )
    print(f"  (the untracked loop: {1000 * base_step:.2f} ms a step)")


if __name__ == "__main__":
    main()
