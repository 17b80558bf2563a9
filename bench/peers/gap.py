"""The gap: the shipped study run exactly as the README says, against the same study glued by hand with Optuna alone.

    python bench/peers/gap.py                 # 3 interleaved repeats of both; prints each run and the median ratio
    python bench/peers/gap.py --repeats 1
    python bench/peers/gap.py --fixed 30 --epochs 1   # both train the same configurations, no pruner (bench/peers/fixed_work.py)
    python bench/peers/gap.py --seed 3 --repeats 1    # both samplers seeded 3 instead of the file's 0

`hpo run studies/digits_mlp.yaml` (its only change: the output folder, a fresh one per run) and
`bench/peers/optuna_alone.py` (TPE + Hyperband, 2 `spawn` processes on one SQLite storage) run one after the other, alternating, so a
load that comes and goes on a shared machine weighs on both. Wall time is the whole command, start-up included; CPU
time is the user + system seconds of the command and every process it waited for (less sensitive to other work on the
machine than wall time, but blind to how well the cores were kept busy). Target (issue 26): median wall ratio
hpo / Optuna <= 1.05 with the same best-accuracy band.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import optuna
from fixed_work import STEPS_PER_EPOCH, configurations, write_hpo_study

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.common import load_average, timed  # noqa: E402

STUDY_FILE = ROOT / "studies" / "digits_mlp.yaml"


def best_of(storage: str, name: str) -> tuple[float, int, int]:
    """Best accuracy, trials pruned, and training steps run in all (the work done, which the samplers' draws vary)."""
    study = optuna.load_study(study_name=name, storage=storage)
    values = [t.value for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    pruned = sum(t.state == optuna.trial.TrialState.PRUNED for t in study.trials)
    steps = sum(max(t.intermediate_values, default=0) for t in study.trials)
    return max(values, default=float("nan")), pruned, steps


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def shipped_runners(seed: int | None) -> dict[str, Callable[[Path], tuple[float, float, int, int]]]:
    """The shipped study as the README runs it, and its Optuna-alone glue; `seed`: both samplers' seed instead of
    the file's 0 (the draws, not the tools, then differ: how much of a gap at one seed is that seed's draws)."""

    def run_hpo(folder: Path) -> tuple[float, float, int, int]:
        hpo = Path(sys.executable).with_name("hpo")
        changes = ["--set", f"study.output_dir={folder}"]
        if seed is not None:
            changes += ["--set", f"study.sampler.seed={seed}"]
        wall = timed([str(hpo), "run", str(STUDY_FILE), *changes])
        return (wall, *best_of(f"sqlite:///{folder / 'study.db'}", "digits_mlp"))

    def run_optuna(folder: Path) -> tuple[float, float, int, int]:
        glue = [sys.executable, str(ROOT / "bench" / "peers" / "optuna_alone.py"), "--out", str(folder)]
        wall = timed([*glue, *(["--seed", str(seed)] if seed is not None else [])])
        return (wall, *best_of(f"sqlite:///{folder / 'study.db'}", "digits_mlp"))

    return {"hpo": run_hpo, "optuna": run_optuna}


def fixed_runners(count: int, epochs: int) -> dict[str, Callable[[Path], tuple[float, float, int, int]]]:
    """Both contenders on the same `count` configurations for `epochs` epochs, no pruner (bench/peers/fixed_work.py)."""
    points = configurations(count)

    steps = count * epochs * STEPS_PER_EPOCH

    def hpo_fixed(folder: Path) -> tuple[float, float, int, int]:
        study = write_hpo_study(folder, points, epochs)
        wall = timed([str(Path(sys.executable).with_name("hpo")), "run", str(study)])
        best, pruned, _ = best_of(f"sqlite:///{folder / 'out' / 'study.db'}", "digits_mlp")
        return wall, best, pruned, steps

    def optuna_fixed(folder: Path) -> tuple[float, float, int, int]:
        glue = [sys.executable, str(ROOT / "bench" / "peers" / "fixed_work.py"), "--out", str(folder)]
        wall = timed([*glue, "--fixed", str(count), "--epochs", str(epochs)])
        best, pruned, _ = best_of(f"sqlite:///{folder / 'study.db'}", "digits_mlp")
        return wall, best, pruned, steps

    return {"hpo": hpo_fixed, "optuna": optuna_fixed}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=["hpo", "optuna"], help="run one contender (profiling)")
    parser.add_argument("--fixed", type=int, help="both train these many fixed configurations, no pruner")
    parser.add_argument("--epochs", type=int, default=20, help="with --fixed: epochs per configuration")
    parser.add_argument("--seed", type=int, help="both samplers' seed instead of the study file's 0")
    options = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    runners = shipped_runners(options.seed)
    if options.fixed:
        runners = fixed_runners(options.fixed, options.epochs)
    walls: dict[str, dict[int, float]] = {"hpo": {}, "optuna": {}}  # by repeat
    cpus: dict[str, dict[int, float]] = {"hpo": {}, "optuna": {}}
    with tempfile.TemporaryDirectory(prefix="hpo-gap-") as root:
        for repeat in range(options.repeats):
            order = list(runners.items())
            order = order if repeat % 2 == 0 else order[::-1]  # neither always goes first
            for name, runner in order:
                if options.only and name != options.only:
                    continue
                cpu_before = children_cpu_s()
                try:
                    wall, best, pruned, steps = runner(Path(root) / f"{name}-{repeat}")
                except RuntimeError as failure:  # a run that crashed is a finding, not a figure
                    print(
                        json.dumps({"contender": name, "repeat": repeat, "failed": str(failure)}), flush=True
                    )
                    continue
                cpu = children_cpu_s() - cpu_before
                walls[name][repeat], cpus[name][repeat] = wall, cpu
                record = {
                    "contender": name,
                    "repeat": repeat,
                    "wall_s": round(wall, 2),
                    "cpu_s": round(cpu, 2),
                }
                record.update(load=load_average(), best_accuracy=round(best, 4), pruned=pruned)
                record.update(steps=steps, ms_per_step=round(1000 * wall / steps, 3))
                print(json.dumps(record), flush=True)
    print_ratios("wall", walls, options.repeats)
    print_ratios("CPU", cpus, options.repeats)


def print_ratios(what: str, seconds: dict[str, dict[int, float]], repeats: int) -> None:
    """Median seconds of each, and the median of the per-repeat ratios (repeats where both ran)."""
    paired = [r for r in range(repeats) if r in seconds["hpo"] and r in seconds["optuna"]]
    if not paired:
        return
    ratios = [seconds["hpo"][r] / seconds["optuna"][r] for r in paired]
    print(
        f"{what}: hpo {statistics.median(seconds['hpo'].values()):.1f} s, optuna alone "
        f"{statistics.median(seconds['optuna'].values()):.1f} s; ratio hpo/optuna per repeat "
        f"{', '.join(f'{r:.2f}' for r in ratios)}, median {statistics.median(ratios):.2f} ({len(paired)} paired)"
    )


if __name__ == "__main__":
    main()
