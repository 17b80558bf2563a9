"""The shipped digits study with transformers' `Trainer.hyperparameter_search` (Optuna backend): what HF users start
from.

    python bench/peers/transformers_search.py --out /tmp/hf-digits                 # 30 trials, one after another
    python bench/peers/transformers_search.py --out /tmp/h --trials 1 --epochs 1   # start-up cost
    python bench/peers/transformers_search.py --problem minilm-lora --out /tmp/h-lora --trials 6 --steps 36

transformers' Trainer with the study file's arguments (cosine schedule with 5 % warm-up, batch 32/512, an evaluation
per epoch, seed 0, clipping 1.0, AdamW with decay on matrices only) and its Optuna search: TPE, the Hyperband pruner
(fed by the Trainer at each evaluation), the known-good point enqueued first on the SQLite storage the search opens.
Its search runs trials one after another in this one process (no process per trial, no parallel trials); one torch
thread, as the study's `threads_per_trial`. A trial's value is its last evaluation (transformers' rule).

`--problem minilm-lora`: the Trainer around `model_init` returning bench/peers/minilm_loop.py's model (the pretrained MiniLM
in the sampled peft LoRA adapter), studies/minilm_lora.yaml's arguments cut to `--steps` (linear schedule, ceil(5 %)
warm-up, batch 16/64, the task's padding collator and accuracy, an evaluation every 4 steps), TPE with 3 start-up
trials and the median pruner after 2 complete trials, the study's known-good point enqueued first. The Trainer draws
its own shuffling order (a seeded RandomSampler), not the one hpo's trainer and the hand loop share.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import torch
import transformers
from transformers import Trainer, TrainerCallback, TrainingArguments

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    BATCH,
    ENQUEUED,
    EVAL_BATCH,
    MAX_GRAD_NORM,
    MODEL_KEYS,
    SEED,
    STUDY,
    WARMUP_RATIO,
    Events,
    digits,
    sample,
)


class EventsCallback(TrainerCallback):
    """Keeps each evaluation's accuracy with its time, written when the trial's training ends (pruned or not)."""

    def __init__(self, path: Path, steps: bool = False) -> None:
        self.path, self.steps = (
            path,
            steps,
        )  # steps: also keep each evaluation's global step (the MiniLM problem)
        self.events: Events | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.events = Events(self.path, state.trial_name or time.time())

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if self.events is not None and metrics and "eval_accuracy" in metrics:
            if self.steps:
                self.events.add(state.epoch or 0, float(metrics["eval_accuracy"]), step=state.global_step)
            else:
                self.events.add(round(state.epoch or 0), float(metrics["eval_accuracy"]))

    def on_train_end(self, args, state, control, **kwargs):
        if self.events is not None:
            self.events.write()
            self.events = None


def model_init(trial: Any) -> torch.nn.Module:
    # The Trainer calls model_init before hp_space, so trial.params is still empty here (every trial used to get the
    # default MLP): sample the space, as hp_space will again (Optuna answers a name it has already drawn the same).
    params = sample(trial) if trial is not None else {}
    return digits.model_init({k: params[k] for k in MODEL_KEYS if k in params})


def hp_space(trial: optuna.Trial) -> dict[str, Any]:
    # The Trainer sets the TrainingArguments fields (learning_rate, weight_decay); model_init reads the rest.
    params = sample(trial)
    return {k: params[k] for k in ("learning_rate", "weight_decay")}


def accuracy(prediction: Any) -> dict[str, float]:
    return {"accuracy": float((np.asarray(prediction.predictions).argmax(-1) == prediction.label_ids).mean())}


def run(out: Path, trials: int, epochs: int, seed: int) -> tuple[float, Any]:
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    torch.set_num_threads(1)
    train_set, eval_set = digits.data()
    steps = epochs * math.ceil(len(train_set) / BATCH)
    args = TrainingArguments(
        output_dir=str(out / "trainer"),
        num_train_epochs=epochs,
        per_device_train_batch_size=BATCH,
        per_device_eval_batch_size=EVAL_BATCH,
        lr_scheduler_type="cosine",
        warmup_steps=math.ceil(steps * WARMUP_RATIO),
        max_grad_norm=MAX_GRAD_NORM,
        logging_steps=45,
        eval_strategy="epoch",
        save_strategy="no",
        seed=SEED,
        disable_tqdm=True,
        report_to="none",
        use_cpu=True,
    )
    trainer = Trainer(
        model_init=model_init,
        args=args,
        train_dataset=train_set,
        eval_dataset=eval_set,
        compute_metrics=accuracy,
        callbacks=[EventsCallback(out / "events.jsonl")],
    )
    storage = f"sqlite:///{out / 'study.db'}"
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=8, multivariate=True)
    study = optuna.create_study(study_name=STUDY, storage=storage, direction="maximize", sampler=sampler)
    study.enqueue_trial(ENQUEUED)
    best = trainer.hyperparameter_search(
        hp_space=hp_space,
        compute_objective=lambda metrics: metrics["eval_accuracy"],
        n_trials=trials,
        direction="maximize",
        backend="optuna",
        study_name=STUDY,
        storage=storage,
        load_if_exists=True,
        sampler=sampler,
        pruner=optuna.pruners.HyperbandPruner(min_resource=45, max_resource=steps, reduction_factor=3),
    )
    return time.perf_counter() - started, best


def lora_model_init(trial: Any) -> torch.nn.Module:
    # Imported here, not at the top: peft's import (seconds) is for the MiniLM problem only.
    import minilm_loop

    # The Trainer calls model_init before hp_space, so trial.params is still empty here: sample the space (Optuna gives
    # a trial the same value when hp_space asks for a name again). None: the Trainer's first, unsearched model.
    return minilm_loop.lora_model(minilm_loop.sample(trial) if trial is not None else minilm_loop.ENQUEUED)


def lora_hp_space(trial: optuna.Trial) -> dict[str, Any]:
    # The Trainer sets learning_rate on its TrainingArguments; lora_model_init reads the adapter's fields.
    import minilm_loop

    return {"learning_rate": minilm_loop.sample(trial)["learning_rate"]}


def run_lora(out: Path, trials: int, steps: int, seed: int) -> tuple[float, Any]:
    import minilm_loop

    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    torch.set_num_threads(1)
    train_set, eval_set = minilm_loop.data()
    args = TrainingArguments(
        output_dir=str(out / "trainer"),
        max_steps=steps,
        per_device_train_batch_size=minilm_loop.BATCH,
        per_device_eval_batch_size=minilm_loop.EVAL_BATCH,
        lr_scheduler_type="linear",
        warmup_steps=math.ceil(steps * minilm_loop.WARMUP_RATIO),
        max_grad_norm=minilm_loop.MAX_GRAD_NORM,
        logging_steps=minilm_loop.EVAL_EVERY,
        eval_strategy="steps",
        eval_steps=minilm_loop.EVAL_EVERY,
        save_strategy="no",
        seed=minilm_loop.SEED,
        disable_tqdm=True,
        report_to="none",
        use_cpu=True,
    )
    trainer = Trainer(
        model_init=lora_model_init,
        args=args,
        train_dataset=train_set,
        eval_dataset=eval_set,
        data_collator=minilm_loop.minilm.collator,
        compute_metrics=minilm_loop.minilm.compute_metrics,
        callbacks=[EventsCallback(out / "events.jsonl", steps=True)],
    )
    storage = f"sqlite:///{out / 'study.db'}"
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=minilm_loop.N_STARTUP_TRIALS)
    study = optuna.create_study(
        study_name=minilm_loop.STUDY, storage=storage, direction="maximize", sampler=sampler
    )
    study.enqueue_trial(minilm_loop.ENQUEUED)
    best = trainer.hyperparameter_search(
        hp_space=lora_hp_space,
        compute_objective=lambda metrics: metrics["eval_accuracy"],
        n_trials=trials,
        direction="maximize",
        backend="optuna",
        study_name=minilm_loop.STUDY,
        storage=storage,
        load_if_exists=True,
        sampler=sampler,
        pruner=optuna.pruners.MedianPruner(n_startup_trials=minilm_loop.PRUNER_STARTUP_TRIALS),
    )
    return time.perf_counter() - started, best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/hf_digits"))
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--problem", choices=["digits", "minilm-lora"], default="digits")
    parser.add_argument("--epochs", type=int, default=20, help="digits: epochs per trial")
    parser.add_argument(
        "--steps", type=int, default=36, help="minilm-lora: steps per trial (an evaluation every 4)"
    )
    parser.add_argument("--seed", type=int, default=SEED)
    options = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    transformers.logging.set_verbosity_error()
    if options.problem == "minilm-lora":
        wall, best = run_lora(options.out, options.trials, options.steps, options.seed)
    else:
        wall, best = run(options.out, options.trials, options.epochs, options.seed)
    print(json.dumps({"wall_s": round(wall, 2), "best_run_value": best.objective, "trials": options.trials}))


if __name__ == "__main__":
    main()
