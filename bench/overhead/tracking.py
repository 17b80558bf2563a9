"""Cost of tracking on the training loop: the same run with no tracking, with the experiment store, and with the store
plus an offline wandb run, logging at every step (the worst case). Prints each run's time and its ratio to the baseline
measured in the same invocation.

    OMP_NUM_THREADS=1 python bench/overhead/tracking.py [--steps 300] [--repeats 3]

The wandb figure includes `wandb.init` (about a second, once per trial) and its final sync to the offline file.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from hpo.tracking import RunInfo, build_tracking_callbacks, finish_tracking
from studies.tasks import digits
from trainer import PrinterCallback, Trainer, TrainingArguments


def timed_run(folder: Path, steps: int, tracking: SimpleNamespace | None) -> float:
    args = TrainingArguments(
        output_dir=str(folder),
        max_steps=steps,
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
    )
    spec = SimpleNamespace(tracking=tracking, output_dir=str(folder), name="bench")
    callbacks = (
        []
        if tracking is None
        else build_tracking_callbacks(spec, run=RunInfo(kind="run", name="bench", output_dir=str(folder)))
    )
    train, evaluation = digits.data({"hidden_size": 64})
    trainer = Trainer(
        model=digits.model_init({"hidden_size": 64}), args=args, train_dataset=train, callbacks=callbacks
    )
    trainer.pop_callback(
        PrinterCallback
    )  # printing every record to the terminal would dwarf what is measured
    started = time.perf_counter()
    trainer.train()
    finish_tracking(callbacks, status="completed")  # includes the final flush: part of the run's cost
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    steps = args.steps
    os.environ.setdefault("WANDB_MODE", "offline")
    os.environ.setdefault("WANDB_SILENT", "true")
    variants = {
        "no tracking": None,
        "experiment store": SimpleNamespace(store=True, wandb=None),
        "store + wandb offline": SimpleNamespace(
            store=True, wandb=SimpleNamespace(project="bench", mode="offline")
        ),
    }
    times = {name: float("inf") for name in variants}
    with tempfile.TemporaryDirectory() as scratch:
        timed_run(Path(scratch) / "warmup", 20, None)  # imports and first-call costs out of the way
        # Interleaved repeats, best of each: the machine is shared, so single timings are noisy.
        for repeat in range(args.repeats):
            for i, (name, value) in enumerate(variants.items()):
                times[name] = min(times[name], timed_run(Path(scratch) / f"{repeat}-{i}", steps, value))
    baseline = times["no tracking"]
    print(f"{steps} steps, a log record every step (digits MLP, 1 thread), best of {args.repeats}")
    for name, seconds in times.items():
        print(
            f"  {name:24s} {seconds:6.2f} s   {seconds / baseline:5.2f}x baseline   {1000 * (seconds - baseline) / steps:+.2f} ms/step"
        )


if __name__ == "__main__":
    main()
