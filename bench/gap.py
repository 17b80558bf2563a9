"""The gap: the shipped study run exactly as the README says, against the same study glued by hand with Optuna alone.

    python bench/gap.py                 # 3 interleaved repeats of both; prints each run and the median ratio
    python bench/gap.py --repeats 1

`hpo run studies/digits_mlp.yaml` (its only change: the output folder, a fresh one per run) and
`bench/peer_optuna.py` (TPE + Hyperband, 2 processes on one SQLite storage) run one after the other, alternating, so a
load that comes and goes on a shared machine weighs on both. Wall time is the whole command, start-up included; CPU
time is the user + system seconds of the command and every process it waited for (less sensitive to other work on the
machine than wall time, but blind to how well the cores were kept busy). Target: median wall ratio hpo / Optuna <= 1.1
with the same best-accuracy band.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna

ROOT = Path(__file__).resolve().parent.parent
STUDY_FILE = ROOT / "studies" / "digits_mlp.yaml"


def environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "offline", "WANDB_SILENT": "true"}


def best_of(storage: str, name: str) -> tuple[float, int]:
    study = optuna.load_study(study_name=name, storage=storage)
    values = [t.value for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    pruned = sum(t.state == optuna.trial.TrialState.PRUNED for t in study.trials)
    return max(values, default=float("nan")), pruned


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_hpo(folder: Path) -> tuple[float, float, int]:
    hpo = Path(sys.executable).with_name("hpo")
    command = [str(hpo), "run", str(STUDY_FILE), "--set", f"study.output_dir={folder}"]
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, env=environment(), check=True, capture_output=True)
    wall = time.perf_counter() - started
    return (wall, *best_of(f"sqlite:///{folder / 'study.db'}", "digits_mlp"))


def run_optuna(folder: Path) -> tuple[float, float, int]:
    command = [sys.executable, str(ROOT / "bench" / "peer_optuna.py"), "--out", str(folder)]
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, env=environment(), check=True, capture_output=True)
    wall = time.perf_counter() - started
    return (wall, *best_of(f"sqlite:///{folder / 'study.db'}", "digits_mlp"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=["hpo", "optuna"], help="run one contender (profiling)")
    options = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    walls: dict[str, list[float]] = {"hpo": [], "optuna": []}
    cpus: dict[str, list[float]] = {"hpo": [], "optuna": []}
    with tempfile.TemporaryDirectory(prefix="hpo-gap-") as root:
        for repeat in range(options.repeats):
            order = [("hpo", run_hpo), ("optuna", run_optuna)]
            order = order if repeat % 2 == 0 else order[::-1]  # neither always goes first
            for name, runner in order:
                if options.only and name != options.only:
                    continue
                cpu_before = children_cpu_s()
                wall, best, pruned = runner(Path(root) / f"{name}-{repeat}")
                cpu = children_cpu_s() - cpu_before
                walls[name].append(wall)
                cpus[name].append(cpu)
                print(
                    json.dumps(
                        {
                            "contender": name,
                            "repeat": repeat,
                            "wall_s": round(wall, 2),
                            "cpu_s": round(cpu, 2),
                            "load": round(os.getloadavg()[0], 1),
                            "best_accuracy": round(best, 4),
                            "pruned": pruned,
                        }
                    ),
                    flush=True,
                )
    if walls["hpo"] and walls["optuna"]:
        ratios = [h / o for h, o in zip(walls["hpo"], walls["optuna"], strict=True)]
        print(
            f"hpo {statistics.median(walls['hpo']):.1f} s, optuna alone {statistics.median(walls['optuna']):.1f} s "
            f"(medians of {options.repeats}); ratio hpo/optuna per repeat "
            f"{', '.join(f'{r:.2f}' for r in ratios)}, median {statistics.median(ratios):.2f}"
        )
        cpu_ratios = [h / o for h, o in zip(cpus["hpo"], cpus["optuna"], strict=True)]
        print(
            f"CPU time: hpo {statistics.median(cpus['hpo']):.1f} s, optuna alone {statistics.median(cpus['optuna']):.1f} s;"
            f" ratio per repeat {', '.join(f'{r:.2f}' for r in cpu_ratios)}, median {statistics.median(cpu_ratios):.2f}"
        )


if __name__ == "__main__":
    main()
