"""What pausing costs: PBT's wall time against the same study without its scheduler, and one pause and one resume
against a fresh trial's start, each beside a baseline run in the same session (interleaved, median of the repeats).

    python bench/pause/costs.py pbt                                  # studies/digits_pbt.yaml as shipped / scheduler removed
    python bench/pause/costs.py resume                               # digits: pause and resume cost per trial
    python bench/pause/costs.py resume --study studies/minilm_lora.yaml --repeats 1   # MiniLM LoRA (minutes a run)

`pbt`: `hpo run studies/digits_pbt.yaml` exactly as the README says (only the output folder changes), against the same
file with `study.scheduler` removed: random sampler, as many trials as members, each trained `max_resource` steps with
an evaluation every interval and no pruner, so both do the same trial-steps. Printed: each run's wall time, PBT's pauses
and the intervals its members trained on in place, and the median of the per-repeat ratios PBT / random.

`resume`: the study file turned into a promotion-type ASHA study that pauses at every rung (`continue_in_place: false`),
against the same file with no scheduler and no pruner. From the trials' own records: a resume is the claim of a paused
trial to its first training step (fork, model, restore: `resumes[].restart_restore_s`), a pause the decision to pause to
the trial being paused in the database (checkpoint, exit, database: `pauses[].save_exit_s`), a fresh start the claim of
a new trial to its first step in the baseline run (`startup_s`). Printed as seconds and as ratios to the fresh start.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import optuna
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.common import hpo_command, load_average, timed  # noqa: E402

PBT_STUDY = ROOT / "studies" / "digits_pbt.yaml"


def hpo_run(study_file: Path, output: Path) -> float:
    """Wall seconds of `hpo run FILE` with its output in `output`; a failure raises with its last line."""
    return timed([*hpo_command(), "run", str(study_file), "--set", f"study.output_dir={output}"])


def trials_of(output: Path) -> list[optuna.trial.FrozenTrial]:
    storage = f"sqlite:///{output / 'study.db'}"
    name = optuna.get_all_study_summaries(storage)[0].study_name
    return optuna.load_study(study_name=name, storage=storage).get_trials()


def without_scheduler(spec: dict[str, Any]) -> dict[str, Any]:
    """The study with its scheduler removed: random sampler, no pruner, the same trials and steps, evaluated at the
    same interval."""
    study, scheduler = dict(spec["study"]), spec["study"]["scheduler"]
    study.pop("scheduler")
    study.update(n_trials=scheduler["population"], pruner={"type": "none"})
    study["sampler"] = {"type": "random", "seed": study.get("sampler", {}).get("seed", 0)}
    training = dict(spec["training"])
    interval = scheduler["perturbation_interval"]
    training.update(max_steps=scheduler["max_resource"], eval_strategy="steps", eval_steps=interval)
    return {**spec, "study": study, "training": training}


def with_pausing_asha(spec: dict[str, Any], n_trials: int) -> dict[str, Any]:
    """The study as promotion-type ASHA that pauses at every rung, over its first two evaluations' steps."""
    study, training = dict(spec["study"]), dict(spec["training"])
    study.pop("pruner", None)
    study.update(n_trials=n_trials, enqueue=[])
    steps = int(training.get("eval_steps") or 45)
    for key in ("num_train_epochs", "max_steps"):
        training.pop(key, None)
    training.update(eval_strategy="steps", eval_steps=steps)
    study["scheduler"] = {
        "type": "asha",
        "min_resource": steps,
        "max_resource": 4 * steps,
        "reduction_factor": 2,
        "continue_in_place": False,
    }
    return {**spec, "study": study, "training": training}


def plain(spec: dict[str, Any]) -> dict[str, Any]:
    """The same trials, neither paused nor pruned."""
    study, training = dict(spec["study"]), dict(spec["training"])
    scheduler = study.pop("scheduler")
    study["pruner"] = {"type": "none"}
    training["max_steps"] = scheduler["max_resource"]
    return {**spec, "study": study, "training": training}


def write(spec: dict[str, Any], path: Path) -> Path:
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def interleaved(contenders: dict[str, Path], repeats: int, root: Path) -> dict[str, dict[int, Any]]:
    """Run each contender `repeats` times, alternating which goes first; {name: {repeat: (wall, trials)}}."""
    results: dict[str, dict[int, Any]] = {name: {} for name in contenders}
    names = list(contenders)
    for repeat in range(repeats):
        for name in names if repeat % 2 == 0 else names[::-1]:
            output = root / f"{name}-{repeat}"
            try:
                wall = hpo_run(contenders[name], output)
            except RuntimeError as failure:
                print(json.dumps({"contender": name, "repeat": repeat, "failed": str(failure)}), flush=True)
                continue
            found = trials_of(output)
            results[name][repeat] = (wall, found)
            print(json.dumps({"contender": name, "repeat": repeat, **describe(wall, found)}), flush=True)
    return results


def describe(wall: float, found: list[optuna.trial.FrozenTrial]) -> dict[str, Any]:
    complete = [t for t in found if t.state == optuna.trial.TrialState.COMPLETE]
    record: dict[str, Any] = {"wall_s": round(wall, 2), "load": load_average()}
    record["complete"] = len(complete)
    record["pauses"] = sum(len(t.user_attrs.get("pauses") or []) for t in found)
    record["in_place"] = sum(in_place(t) for t in found)
    return record


def in_place(trial: optuna.trial.FrozenTrial) -> int:
    """Intervals a PBT member was decided at without pausing there."""
    decided = set(trial.system_attrs.get("hpo:pbt_decided") or [])
    paused = {p["step"] for p in trial.user_attrs.get("pauses") or []}
    return len(decided - paused)


def ratio_line(what: str, results: dict[str, dict[int, Any]], top: str, base: str) -> str:
    paired = sorted(set(results[top]) & set(results[base]))
    if not paired:
        return f"{what}: no repeat where both ran"
    ratios = [results[top][r][0] / results[base][r][0] for r in paired]
    return (
        f"{what}: {top} {statistics.median(results[top][r][0] for r in paired):.1f} s, {base} "
        f"{statistics.median(results[base][r][0] for r in paired):.1f} s; ratio per repeat "
        f"{', '.join(f'{r:.2f}' for r in ratios)}, median {statistics.median(ratios):.2f} "
        f"(load {load_average()})"
    )


def run_pbt(options: argparse.Namespace, root: Path) -> None:
    baseline = write(without_scheduler(load(PBT_STUDY)), root / "digits_random.yaml")
    results = interleaved({"pbt": PBT_STUDY, "random": baseline}, options.repeats, root)
    print(ratio_line("PBT wall / random search at the same trial-steps", results, "pbt", "random"))


def run_resume(options: argparse.Namespace, root: Path) -> None:
    asha = with_pausing_asha(load(options.study), options.trials)
    paused_file, plain_file = write(asha, root / "paused.yaml"), write(plain(asha), root / "plain.yaml")
    results = interleaved({"paused": paused_file, "plain": plain_file}, options.repeats, root)
    resumes, pauses, starts = [], [], []
    for _, found in results["paused"].values():
        for trial in found:
            resumes += [r["restart_restore_s"] for r in trial.user_attrs.get("resumes") or []]
            pauses += [p["save_exit_s"] for p in trial.user_attrs.get("pauses") or [] if "save_exit_s" in p]
    for _, found in results["plain"].values():
        starts += [t.user_attrs["startup_s"] for t in found if "startup_s" in t.user_attrs]
    if not (resumes and pauses and starts):
        print("resume: too few pieces measured", len(resumes), len(pauses), len(starts))
        return
    fresh = statistics.median(starts)
    resume, pause = statistics.median(resumes), statistics.median(pauses)
    print(
        f"{options.study.name}: resume (claim to first step) median {resume:.3f} s over {len(resumes)}, "
        f"pause (decision to paused) {pause:.3f} s over {len(pauses)}, fresh start {fresh:.3f} s over "
        f"{len(starts)}; resume / fresh start {resume / fresh:.2f}, pause / fresh start {pause / fresh:.2f} "
        f"(load {load_average()})"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["pbt", "resume"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--study", type=Path, default=ROOT / "studies" / "digits_mlp.yaml", help="resume mode"
    )
    parser.add_argument("--trials", type=int, default=4, help="resume mode: trials per run")
    parser.add_argument(
        "--keep", type=Path, help="run in this folder and keep the studies (to look into them)"
    )
    options = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    run = run_pbt if options.mode == "pbt" else run_resume
    if options.keep is not None:
        options.keep.mkdir(parents=True, exist_ok=True)
        run(options, options.keep)
        return
    with tempfile.TemporaryDirectory(prefix="hpo-pause-") as folder:
        run(options, Path(folder))


if __name__ == "__main__":
    main()
