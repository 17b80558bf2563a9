"""Trials per hour on one GPU with 1, 2 and 4 trials per GPU and `auto` packing, as ratios to one trial per GPU.

    python bench/gpu/packing.py                          # both studies, every mode, on the first visible GPU
    python bench/gpu/packing.py --study small --trials 12 --modes 1,4,auto
    python bench/gpu/packing.py --check                  # write and validate the study files only (runs on CPU)

Two studies, each run once per mode through the command line (`hpo run study.yaml --gpus G`, a generated study file
with `resources.trials_per_gpu` set to the mode), all in this one invocation so that the ratios compare runs on the
same machine at the same time:
- small: a 4-layer BERT (hidden 256, sequence 128, batch 32, bf16) on generated tokens; a trial leaves an H100 mostly
  idle, so packing pays (measured with the round-1 code: 4 per GPU gave 2.86x one per GPU);
- big: trials whose activations take about `--big-gib` GiB each (28 by default): two fit on an 80 GB GPU, three do not.
  The round-1 code packed blindly and lost 4 of 6 trials to CUDA out-of-memory at 4 per GPU; now every number is a cap
  under the GPU gate (a trial starts beside others only when NVML's free memory covers its expected peak), so no mode
  may lose a trial: a trial that still runs out of memory beside others is queued again and counted as "requeued".
Throughput is completed trials per hour over the span from the first trial's start to the last one's end (from the
study's storage); failed trials (and requeued attempts) are counted apart. A mode the installed hpo refuses is
reported as such. Where no CUDA GPU is visible (NVML sees none) the benchmark says so and exits 0.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.common import hpo_command  # noqa: E402
from hpo.scheduling.gpu_gate import PEAK_ATTR  # noqa: E402
from hpo.scheduling.gpu_memory import read_gpu_memory  # noqa: E402  (NVML only: this process never starts CUDA)

TASK = Path(__file__).with_name("packing_task.py")
MODES = ("1", "2", "4", "auto")
CONFIG_ERROR = 2  # hpo's exit code for a study file it refuses


@dataclass
class Outcome:
    study: str
    mode: str
    completed: int = 0
    failed: int = 0
    span_s: float = 0.0
    wall_s: float = 0.0
    requeued: int = 0  # attempts that ran out of memory beside others and were queued again (not failures)
    refused: str = ""
    most_at_once: int = 0  # the most trials (attempts included) that ran side by side
    peak_gib: float = 0.0  # the largest PyTorch peak a trial recorded (trial attribute peak_gpu_memory)

    @property
    def per_hour(self) -> float:
        return self.completed / self.span_s * 3600 if self.span_s > 0 else 0.0


def study_spec(
    kind: str, name: str, folder: Path, trials: int, mode: str, steps: int, big_gib: float
) -> dict:
    small = kind == "small"
    return {
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
            "model_init": f"packing_task:{'bert_init' if small else 'hungry_init'}",
            "data": f"packing_task:{'token_data' if small else 'feature_data'}",
            "compute_metrics": "packing_task:accuracy",
        },
        "model": {} if small else {"activation_gib": big_gib, "batch_size": 32},
        "training": {
            "max_steps": steps,
            "per_device_train_batch_size": 32,
            # a big trial's activations grow with the batch: its final evaluation at 128 asked for 4x the training
            # peak (57 GiB at --big-gib 42 on an H200) and failed alone on the GPU
            "per_device_eval_batch_size": 128 if small else 32,
            "eval_strategy": "no",
            "logging_steps": max(1, steps // 4),
            "save_strategy": "no",
            "bf16": True,
            "disable_tqdm": True,
        },
        "search_space": {"learning_rate": {"type": "float", "low": 1e-5, "high": 1e-3, "log": True}},
        "resources": {"trials_per_gpu": mode if mode == "auto" else int(mode), "threads_per_trial": 1},
        "tracking": {"store": False},
    }


def write_study(root: Path, kind: str, mode: str, options: argparse.Namespace) -> Path:
    folder = root / f"{kind}-{mode}"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(TASK, folder / TASK.name)
    trials = options.trials if kind == "small" else options.big_trials
    steps = options.steps if kind == "small" else options.big_steps
    spec = study_spec(kind, f"packing-{kind}-{mode}", folder, trials, mode, steps, options.big_gib)
    path = folder / "study.yaml"
    path.write_text(f"# python bench/gpu/packing.py --study {kind}\n" + yaml.safe_dump(spec, sort_keys=False))
    return path


def run_mode(root: Path, kind: str, mode: str, gpu: str, options: argparse.Namespace) -> Outcome:
    path = write_study(root, kind, mode, options)
    started = time.perf_counter()
    done = subprocess.run(
        [*hpo_command(), "run", str(path), "--gpus", gpu], cwd=path.parent, capture_output=True, text=True
    )
    outcome = Outcome(kind, mode, wall_s=time.perf_counter() - started)
    if done.returncode == CONFIG_ERROR:
        outcome.refused = (done.stderr.strip().splitlines() or ["refused"])[-1]
        return outcome
    (path.parent / "hpo.log").write_text(done.stdout + done.stderr)
    return count_trials(outcome, path.parent / "out" / "study.db", f"packing-{kind}-{mode}")


def count_trials(outcome: Outcome, database: Path, name: str) -> Outcome:
    import optuna

    study = optuna.load_study(study_name=name, storage=f"sqlite:///{database}")
    finished = [t for t in study.trials if t.state.is_finished()]
    completed = [t for t in finished if t.state == optuna.trial.TrialState.COMPLETE]
    outcome.completed = len(completed)
    failed = [t for t in finished if t.state == optuna.trial.TrialState.FAIL]
    outcome.requeued = sum(1 for t in failed if t.user_attrs.get("requeued"))
    outcome.failed = len(failed) - outcome.requeued
    if completed:
        first = min(t.datetime_start for t in finished)
        last = max(t.datetime_complete for t in finished)
        outcome.span_s = (last - first).total_seconds()
    # on the GPU from the gate's admission: a trial waiting there for room is RUNNING in the storage meanwhile
    outcome.most_at_once = most_at_once([(on_gpu_from(t), t.datetime_complete) for t in finished])
    peaks = [float(t.user_attrs.get(PEAK_ATTR, 0)) for t in finished]
    outcome.peak_gib = max(peaks, default=0.0) / 2**30
    return outcome


def on_gpu_from(trial: Any) -> datetime | None:
    """When the GPU gate let the attempt start (`gpu_admitted_at`, the worker's clock as Optuna's naive local time);
    the storage's start where it was not recorded. The storage's start is the claim: a trial that waits at the gate
    for the GPU to empty is RUNNING meanwhile without running."""
    admitted = trial.user_attrs.get("gpu_admitted_at")
    return datetime.fromtimestamp(float(admitted)) if admitted is not None else trial.datetime_start


def most_at_once(spans: list[tuple[datetime, datetime]]) -> int:
    """The most intervals open at one moment (an end before a start at the same instant: they did not overlap)."""
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    running = most = 0
    for _, change in events:
        running += change
        most = max(most, running)
    return most


def report(outcomes: list[Outcome]) -> None:
    print(
        f"\n{'study':<6} {'per GPU':>7} {'done':>5} {'failed':>6} {'requeued':>8} {'span s':>8} {'trials/h':>9} "
        f"{'vs 1':>6} {'at once':>7} {'peak GiB':>8}"
    )
    for kind in dict.fromkeys(o.study for o in outcomes):
        rows = [o for o in outcomes if o.study == kind]
        baseline = next((o.per_hour for o in rows if o.mode == "1" and not o.refused), 0.0)
        for o in rows:
            if o.refused:
                print(f"{kind:<6} {o.mode:>7}  refused by this hpo: {o.refused}")
                continue
            ratio = f"{o.per_hour / baseline:.2f}x" if baseline else "-"
            print(
                f"{kind:<6} {o.mode:>7} {o.completed:>5} {o.failed:>6} {o.requeued:>8} {o.span_s:>8.1f} "
                f"{o.per_hour:>9.0f} {ratio:>6} {o.most_at_once:>7} {o.peak_gib:>8.1f}"
            )


def check(root: Path, options: argparse.Namespace) -> int:
    """Write every study file and have `hpo validate` check it (no GPU needed): the files the benchmark runs."""
    status = 0
    for kind in options.studies:
        for mode in options.modes:
            path = write_study(root, kind, mode, options)
            done = subprocess.run(
                [*hpo_command(), "validate", str(path), "--no-dry-run"],
                cwd=path.parent,
                capture_output=True,
                text=True,
            )
            verdict = "valid" if done.returncode == 0 else f"refused: {done.stderr.strip().splitlines()[-1:]}"
            print(f"{kind}-{mode}: {verdict}")
            status = status or done.returncode
    return status


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", choices=("small", "big", "both"), default="both")
    parser.add_argument("--modes", default=",".join(MODES), help="trials per GPU to compare, e.g. 1,4,auto")
    parser.add_argument("--trials", type=int, default=12, help="trials of the small study")
    parser.add_argument("--steps", type=int, default=300, help="training steps of a small trial")
    parser.add_argument("--big-trials", type=int, default=6)
    parser.add_argument("--big-steps", type=int, default=60)
    parser.add_argument("--big-gib", type=float, default=28.0, help="activation memory of a big trial, GiB")
    parser.add_argument("--gpu", default=None, help="the GPU to pack (default: the first visible one)")
    parser.add_argument("--check", action="store_true", help="only write and validate the study files")
    parser.add_argument("--keep", action="store_true", help="keep the study folders (printed at the end)")
    options = parser.parse_args(argv)
    options.studies = ("small", "big") if options.study == "both" else (options.study,)
    options.modes = [mode.strip() for mode in options.modes.split(",") if mode.strip()]
    unknown = [mode for mode in options.modes if mode not in MODES]
    if unknown:
        parser.error(f"--modes: {','.join(unknown)} unknown; choose from {','.join(MODES)}")
    return options


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    root = Path(tempfile.mkdtemp(prefix="gpu-packing-"))
    try:
        if options.check:
            return check(root, options)
        gpus = read_gpu_memory()
        if not gpus:
            print("no CUDA GPU visible here (NVML sees none): nothing to measure; run it on a GPU machine")
            return 0
        chosen = next((g for g in gpus if options.gpu in (None, str(g.index), g.uuid)), None)
        if chosen is None:
            print(f"--gpu {options.gpu}: not a visible GPU ({', '.join(str(g.index) for g in gpus)})")
            return 2
        gpu = str(chosen.index)
        print(f"GPU {gpu}: {chosen.name}, {chosen.total / 2**30:.1f} GiB, {chosen.free / 2**30:.1f} GiB free")
        outcomes = []
        for kind in options.studies:
            for mode in options.modes:
                outcomes.append(run_mode(root, kind, mode, gpu, options))
                print(
                    f"== {kind} {mode}: {outcomes[-1]}", flush=True
                )  # each as it ends: a run cut short keeps them
        report(outcomes)
        return 0
    finally:
        if options.keep:
            print(f"study folders kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
