"""The peers that run in their own environments, on a recording: Syne Tune's schedulers (peer_synetune.py), Ray Tune's
ASHA (peer_ray.py), SMAC3 with Hyperband (peer_smac.py) and DEHB (peer_dehb.py). Each is a script run by another
interpreter, given the recording, the study's space, the workers, the budget and the costs; its traces are judged by
the same `run_figures` as our simulator's runs (bench/search/run.py: peer_command, peer_figures)."""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.search.recording import Recording
from bench.search.run import peer_command, peer_figures

SYNETUNE = {
    "stop-asha": "Syne Tune stop ASHA",
    "promotion-asha": "Syne Tune promotion ASHA",
    "mobster": "Syne Tune MOBSTER",
    "hypertune": "Syne Tune Hyper-Tune",
    "dyhpo": "Syne Tune DyHPO",
}
SYNETUNE_MODEL_BASED = {"mobster", "hypertune", "dyhpo"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--synetune-python", type=Path, help="Syne Tune's interpreter (.venv-syne)")
    parser.add_argument("--synetune-schedulers", default=",".join(SYNETUNE))
    parser.add_argument("--ray-python", type=Path, help="Ray Tune's interpreter (.venv-ray)")
    parser.add_argument("--smac-python", type=Path, help="SMAC3's and DEHB's interpreter (.venv-smac)")
    parser.add_argument("--peer-seeds", type=int, help="seeds for the peers (default: --seeds)")
    parser.add_argument(
        "--model-seeds", type=int, help="seeds for the model-based peers (MOBSTER, Hyper-Tune, DyHPO, SMAC3)"
    )


def run_all(
    recording: Recording, budget_s: float, options: argparse.Namespace
) -> Iterator[tuple[str, list[dict]]]:
    """(peer label, [figures per seed]) for every peer whose interpreter is given, one peer at a time."""
    seeds = options.peer_seeds or options.seeds
    model_seeds = options.model_seeds or seeds
    problem = recording.problem
    first = problem.eval_every
    costs = [f"--start-s={problem.start_s}"]
    if options.synetune_python:
        rungs = ",".join(str(level // first) for level in problem.asha_levels)
        extra = [*costs, f"--pause-s={problem.pause_s}", f"--resume-s={problem.resume_s}", f"--rungs={rungs}"]
        # every point sampled, as ours are (not the space's midpoint on every seed); the tuner's poll, a quantum of
        # simulated time, 1/2000 of the budget (0.01 s on digits) rather than Syne Tune's 5 s: each poll costs real
        # time, and a fixed 0.01 s made MiniLM's 153 s budget slow to simulate
        extra += ["--first=none", f"--poll-s={budget_s / 2000:.4g}"]
        for name in options.synetune_schedulers.split(","):
            count = model_seeds if name in SYNETUNE_MODEL_BASED else seeds
            runs = call(options.synetune_python, "peer_synetune.py", recording, budget_s, count, extra, name)
            yield SYNETUNE[name], judged(runs[name], recording, budget_s)
    if options.ray_python:
        extra = [*costs, f"--grace={problem.asha_levels[0] // first}", f"--eta={problem.eta}"]
        runs = call(options.ray_python, "peer_ray.py", recording, budget_s, seeds, extra)
        yield "Ray Tune ASHA", judged(runs["ray-asha"], recording, budget_s)
    if options.smac_python:
        extra = [*costs, f"--min-fidelity={problem.asha_levels[0] // first}", f"--eta={problem.eta}"]
        runs = call(options.smac_python, "peer_dehb.py", recording, budget_s, seeds, extra)
        yield "DEHB", judged(runs["dehb"], recording, budget_s)
        runs = call(options.smac_python, "peer_smac.py", recording, budget_s, model_seeds, extra)
        yield "SMAC3 Hyperband", judged(runs["smac-hyperband"], recording, budget_s)


def call(
    python: Path,
    script: str,
    recording: Recording,
    budget_s: float,
    seeds: int,
    extra: list[str],
    scheduler: str | None = None,
) -> dict[str, Any]:
    command = [*peer_command(python, script, recording, budget_s), f"--seeds={seeds}", *extra]
    if scheduler is not None:
        command.append(f"--schedulers={scheduler}")
    started = time.perf_counter()
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    label = scheduler or script
    print(
        f"{recording.problem.name}: {label}, {seeds} seeds in {time.perf_counter() - started:.0f} s",
        flush=True,
    )
    return json.loads(done.stdout)


def judged(runs: list[dict[str, Any]], recording: Recording, budget_s: float) -> list[dict]:
    return [asdict(figures) for figures in peer_figures(runs, recording, budget_s)]
