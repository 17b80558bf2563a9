"""The suite's recorded search problems: what a problem is (`Problem`), and the registry of every one (`PROBLEMS`), filled
by one module per family: digits.py (an MLP and a CNN on scikit-learn's digits), text.py (LoRA on MiniLM, a tiny
character-level GPT), tabular.py (MLPs on bundled and generated tables, classification and regression).

A problem is a small description. The search space, the training section and the task come from the study file itself, so the recording
trains exactly what `hpo run` on that file would train; the rest says how much of it to record and how a study on it
is run (its workers, its configuration count) for the simulated budget."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hpo.spec.scheduler import rung_levels

ROOT = Path(__file__).resolve().parents[3]
DATA = Path(__file__).resolve().parents[1] / "data"
STUDIES = Path(__file__).resolve().parent  # the suite's own study files, beside their families


@dataclass(frozen=True)
class Problem:
    name: str
    study: Path  # the study file: search space, task, training section, metric and direction
    configurations: int  # how many configurations the recording draws from the search space
    draw_seed: int  # the seed of that draw (a RandomSampler over the study's space)
    steps: int  # the full budget of one trial, in global steps
    eval_every: int  # global steps between two evaluations: the points a pruner or a rung can act at
    n_trials: int  # the study's configuration count; with `workers` it sets the simulated wall budget
    workers: int
    asha_levels: tuple[
        int, ...
    ]  # promotion ASHA's pause points, in global steps (rung_levels of the scheduler)
    eta: int = 3
    pruner_min_steps: int = 0  # Optuna's successive halving / Hyperband min_resource, in global steps
    # Measured by `bench/pause/costs.py resume` on digits, quiet 2-core machine (docs/benchmarks.md, "Pausing and
    # resuming"), after issue 26's warm resumes: medians over 12-18 trials. Before them: 0.25 s, 0.8 s and 0.2 s.
    pause_s: float = 0.035  # one pause: the decision at the rung to the trial paused in the database
    resume_s: float = 0.098  # one resume: claim to the first step (fork, model, restore)
    start_s: float = (
        0.086  # a new trial: claim to the first step (fork, model, data), beyond the recorded set-up
    )
    # A stop-type method's report (storage write, pruner's call) and the part of start_s after the claim: charged
    # when given (suite.py --report-s, --start-inside-s; bench/search/trial_costs.py measures both), else 0 and all.
    report_s: float = 0.0
    save_s: float = (
        0.0  # a checkpoint at a trial's new best (save_strategy: best), any method (suite.py --save-s)
    )
    start_inside_s: float | None = None
    # Keys that replace the study file's training section in the recording (and in a real run of the problem, with
    # --set): a denser evaluation than the file's, so that a pruner or a rung has more points to act at.
    training: dict[str, Any] = field(default_factory=dict)
    # The fresh set: problems made after hpo's candidates and the held-out rule were fixed, kept out of the suite's
    # tables and of every choice, so that the rule's pick is judged on problems nothing was chosen on
    # (`suite.py --fresh`, `report.py --fresh`).
    fresh: bool = False
    # Where its recording lives: data/<name>.json.gz, or another folder of recordings of the same problems
    # (`suite.py --data-dir`, e.g. data/dense/: the same draws, more of them).
    data_dir: Path = DATA

    @classmethod
    def from_study(cls, name: str, configurations: int, draw_seed: int, **given: Any) -> Problem:
        """A problem of the suite from its study file (STUDIES/<name>.yaml): the length (`max_steps`) and evaluation
        cadence (`eval_steps`) come from the file; the paper-style ASHA rungs and the pruners' min_resource start at
        the first evaluation, eta 3 (rung_levels' layout)."""
        study = STUDIES / f"{name}.yaml"
        training = yaml.safe_load(study.read_text())["training"]
        steps, every = int(training["max_steps"]), int(training["eval_steps"])
        levels = tuple(rung_levels(every, steps, 3))
        return cls(
            name=name,
            study=study,
            configurations=configurations,
            draw_seed=draw_seed,
            steps=steps,
            eval_every=every,
            n_trials=30,
            workers=2,
            asha_levels=levels,
            pruner_min_steps=every,
            **given,
        )

    @property
    def rung_steps(self) -> list[int]:
        """Every global step with an evaluation, the last one being the end of training."""
        return list(range(self.eval_every, self.steps + 1, self.eval_every))

    @property
    def data_file(self) -> Path:
        return self.data_dir / f"{self.name}.json.gz"


def _registry() -> dict[str, Problem]:
    from bench.search.problems import digits, tabular, text  # noqa: PLC0415 (they import Problem from here)

    problems = [*digits.PROBLEMS, *text.PROBLEMS, *tabular.PROBLEMS]
    return {problem.name: problem for problem in problems}


PROBLEMS = _registry()
# The problems whose recording exists: a fresh set is made (its study files, stated) before it is recorded, one
# problem at a time, and a problem without its recording has nothing to replay yet.
RECORDED = sorted(name for name, problem in PROBLEMS.items() if problem.data_file.exists())
