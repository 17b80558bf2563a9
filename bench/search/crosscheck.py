"""Check the simulator against a real `hpo run`: the same recorded configurations, enqueued in the same order, one
worker, the same method; then trial by trial (configuration, state, the step it stopped at) and the time to a target.

    python bench/search/crosscheck.py --method tpe+hyperband --trials 9      # about a minute on 2 busy cores
    python bench/search/crosscheck.py --method tpe+asha --trials 9

With one worker and every configuration enqueued, the decisions depend only on the values reported, and a real trial
reproduces its recorded values (same task code, arguments, seed and thread count), so the two runs must take the
same decisions: any difference in the trial table is a bug in the simulator (or a recording that no longer matches the
code). The clock cannot match exactly: a real run's per-trial start, pause and resume costs are the simulator's
parameters, and the machine's load moves both. Real times are divided by this machine's speed against the
recording's (`speed.py`, as real.py does), so the implied per-trial start cost is in the recording's seconds (real.py
--start-s takes it). The times are printed side by side with their ratio; the timing tolerance (`--tolerance`,
default 0.35: within 35 %) is loose on purpose on a shared 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import optuna
import yaml
from optuna.trial import FrozenTrial, TrialState

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from bench.pause.asha import evaluations  # noqa: E402
from bench.search.methods import Method, methods_for  # noqa: E402
from bench.search.problems import PROBLEMS, Problem  # noqa: E402
from bench.search.recording import Recording, load  # noqa: E402
from bench.search.simulate import simulate  # noqa: E402
from bench.search.speed import speed_factor  # noqa: E402
from hpo.spec import load_study_spec  # noqa: E402
from hpo.spec.scheduler import rung_levels  # noqa: E402
from hpo.storage.study_db import load_existing_study  # noqa: E402
from hpo.study import run_study  # noqa: E402


def study_section(method: Method, problem: Problem) -> dict[str, Any]:
    if method.asha:
        levels = method.levels or problem.asha_levels
        # hpo lays its rungs out from min_resource alone: they must be the levels the simulator pauses at
        assert rung_levels(levels[0], problem.steps, problem.eta, len(levels)) == list(levels), (
            levels,
            problem.name,
        )
        return {
            "scheduler": {
                "type": "asha",
                "resource": "steps",
                "min_resource": levels[0],
                "max_resource": problem.steps,
                "reduction_factor": problem.eta,
                "max_rungs": len(levels),
                "continue_in_place": method.in_place,
                "promote_underfilled": method.underfilled,
                "rank_gate": (
                    {"min_pairs": method.gate.min_pairs, "min_correlation": method.gate.min_correlation}
                    if method.gate
                    else {"enabled": False}
                ),
            }
        }
    if method.scheduler is not None:  # a scheduler that stops trials: the section as a study file gives it
        return {"scheduler": method.scheduler}
    if method.hpo_chooses:  # neither section: hpo chooses, as the simulator's pruner was built
        return {}
    # No pruner said explicitly: a study file without one gets what hpo chooses; the simulator's method is none.
    return {"pruner": method.pruner or {"type": "none"}}


def study_name(method: Method) -> str:
    return (
        f"crosscheck_{method.name.replace('+', '_')}"  # Hyperband's brackets hash it: the same in both runs
    )


def write_study(problem: Problem, method: Method, folder: Path, points: list[dict[str, Any]]) -> Path:
    data = yaml.safe_load(problem.study.read_text())
    study = {k: v for k, v in data["study"].items() if k not in ("pruner", "scheduler", "enqueue")}
    study.update(
        name=study_name(method),
        output_dir=str(folder / "study"),
        n_trials=len(points),
        enqueue=points,
        sampler={"type": "random", "seed": 0},  # never asked: every configuration is enqueued
        **study_section(method, problem),
    )
    data["study"] = study
    data["resources"] = {**data.get("resources", {}), "workers": 1}
    data["tracking"] = {"store": True}  # every evaluation with its time
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def last_step(trial: FrozenTrial) -> int | None:
    key = "pruned_step" if trial.state == TrialState.PRUNED else "global_step"
    step = trial.user_attrs.get(key)
    return int(step) if step is not None else None


def real_run(path: Path, recording: Recording, target: float) -> dict[str, Any]:
    started = time.time()
    run_study(path, workers=1, dry_run=False)
    spec = load_study_spec(path)
    trials = sorted(load_existing_study(spec).get_trials(deepcopy=False), key=lambda t: t.number)
    first = min(t.datetime_start.timestamp() for t in trials if t.datetime_start)
    events = sorted(evaluations(spec))
    reached = next((at for at, value in events if value >= target), None)
    return {
        "wall_s": time.time() - started,
        "from_first_trial_s": max(at for at, _ in events) - first,
        "to_target_s": None if reached is None else reached - first,
        "trials": [
            (row, t.state.name, last_step(t), t.value)
            for row, t in zip(replayed(recording, trials), trials, strict=True)
        ],
    }


def replayed(recording: Recording, trials: list[FrozenTrial]) -> list[int]:
    """The recorded configuration each trial maps to, in trial order, as the simulator maps them (each once)."""
    rows: list[int] = []
    for trial in trials:
        rows.append(recording.nearest(trial.params, taken=rows))
    return rows


def simulated_run(recording: Recording, method: Method, points: list[dict], target: float) -> dict[str, Any]:
    outcome = simulate(
        recording,
        method,
        0,
        workers=1,
        budget_s=1e9,
        n_trials=len(points),
        enqueue=points,
        study_name=study_name(method),  # Hyperband's brackets hash the study's name with the trial number
    )
    reached = next((at for at, value in outcome.trace if value >= target), None)
    step = recording.problem.eval_every
    return {
        "from_first_trial_s": outcome.trace[-1][0],  # the last evaluation, as the real run's figure
        "to_target_s": reached,
        "trials": [
            (t.config, t.state.upper(), t.done * step, t.best if t.state == "complete" else t.last)
            for t in outcome.trials
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--problem", default="digits", choices=sorted(PROBLEMS))
    parser.add_argument("--method", default="tpe+hyperband")
    parser.add_argument("--trials", type=int, default=9)
    parser.add_argument("--seed", type=int, default=0, help="which recorded configurations, in which order")
    parser.add_argument("--tolerance", type=float, default=0.35)
    options = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    recording = load(PROBLEMS[options.problem])
    known = {m.name: m for m in methods_for(recording.problem)}
    if options.method not in known:
        parser.error(f"--method: unknown {options.method!r}; known: {', '.join(sorted(known))}")
    method = known[options.method]
    chosen = random.Random(options.seed).sample(range(len(recording.curves)), options.trials)
    points = [recording.curves[i].params for i in chosen]
    target = max(
        recording.final(i) for i in chosen
    )  # the best of these configurations: reached late, if at all
    factor = speed_factor(recording)  # real times below are divided by it: the recording's seconds
    folder = Path(tempfile.mkdtemp(prefix="search-crosscheck-"))
    try:
        real = real_run(write_study(recording.problem, method, folder, points), recording, target)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for key in ("to_target_s", "from_first_trial_s"):
        real[key] = real[key] / factor if real[key] else real[key]
    simulated = simulated_run(recording, method, points, target)
    print(
        f"{options.method}, {options.trials} recorded configurations {chosen}, 1 worker, target {target:.4f}; "
        f"this machine takes {factor:.2f}x the recorded time (real times below divided by it)"
    )
    print(f"{'trial':>5}  {'real (config, state, step, value)':<44}{'simulated':<44}")
    same = True
    for number, (a, b) in enumerate(zip(real["trials"], simulated["trials"], strict=False)):
        agree = a[:3] == b[:3]
        same &= agree
        print(f"{number:>5}  {str(a):<44}{str(b):<44}{'' if agree else '  <- differs'}")
    same &= len(real["trials"]) == len(simulated["trials"])
    ratios = {}
    for key in ("to_target_s", "from_first_trial_s"):
        if real[key] and simulated[key]:
            ratios[key] = simulated[key] / real[key]
            print(f"{key}: real {real[key]:.2f} s, simulated {simulated[key]:.2f} s ({ratios[key]:.2f}x)")
    if real["from_first_trial_s"] and simulated["from_first_trial_s"]:
        # What one trial's start would have to cost for the simulated clock to match this run (one worker, so the
        # whole gap is per-trial overhead, plus whatever load the machine had).
        implied = recording.problem.start_s + (
            real["from_first_trial_s"] - simulated["from_first_trial_s"]
        ) / len(real["trials"])
        print(
            f"implied per-trial start cost {implied:.2f} s (the problem says {recording.problem.start_s} s)"
        )
    timely = all(abs(r - 1) <= options.tolerance for r in ratios.values())
    print(
        f"decisions {'agree' if same else 'DIFFER'}; times {'within' if timely else 'OUTSIDE'} "
        f"{options.tolerance:.0%}; real hpo run wall {real['wall_s']:.1f} s"
    )
    print(json.dumps({"real": real, "simulated": simulated}, default=str))
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
