"""`Trainer.hyperparameter_search` as in transformers, on a transformers model built from a config (no download)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import optuna
import pytest
import torch
import torch._dynamo  # noqa: F401 - sets TORCHINDUCTOR_CACHE_DIR at import, before the env-leak check starts
from transformers import BertConfig, BertForSequenceClassification

from hpo.integrations.hf_search import BestRun, default_compute_objective
from trainer import EarlyStoppingCallback, Trainer, TrainerCallback, TrainingArguments

MARKER = 5  # a sequence is positive when it contains this token


def tiny_bert(hidden: int = 16) -> BertForSequenceClassification:
    config = BertConfig(
        vocab_size=32,
        hidden_size=hidden,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        num_labels=2,
    )
    return BertForSequenceClassification(config)


def dataset(count: int, seed: int) -> list[dict[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(count):
        ids = torch.randint(6, 32, (8,), generator=generator)
        label = int(torch.rand(1, generator=generator) < 0.5)
        if label:
            ids[torch.randint(0, 8, (1,), generator=generator)] = MARKER
        rows.append(
            {
                "input_ids": ids,
                "attention_mask": torch.ones(8, dtype=torch.long),
                "labels": torch.tensor(label),
            }
        )
    return rows


def accuracy(prediction) -> dict[str, float]:
    logits = (
        prediction.predictions[0] if isinstance(prediction.predictions, tuple) else prediction.predictions
    )
    return {"accuracy": float((np.asarray(logits).argmax(-1) == prediction.label_ids).mean())}


class Recorder(TrainerCallback):
    """Counts evaluations; what each instance had seen when a trial began shows whether instances are shared."""

    # The instances themselves, not their id(): a trial's instance freed after it ended can leave its address to the
    # next trial's (CI saw two trials' Recorders share an id); held here, each keeps its own.
    seen_at_train_begin: list[tuple[Recorder, int]] = []

    def __init__(self) -> None:
        self.evaluations = 0

    def on_train_begin(self, args, state, control, **kwargs):
        Recorder.seen_at_train_begin.append((self, self.evaluations))

    def on_evaluate(self, args, state, control, **kwargs):
        self.evaluations += 1


def make_trainer(tmp_path: Path, callbacks: list, model_init=lambda: tiny_bert(), **fields) -> Trainer:
    args = TrainingArguments(
        **fields,
        output_dir=str(tmp_path / "search"),
        max_steps=6,
        per_device_train_batch_size=16,
        learning_rate=1e-3,
        eval_strategy="steps",
        eval_steps=3,
        save_strategy="no",
        logging_steps=3,
        disable_tqdm=True,
        seed=0,
        metric_for_best_model="accuracy",
    )
    return Trainer(
        model_init=model_init,
        args=args,
        train_dataset=dataset(96, 0),
        eval_dataset=dataset(48, 1),
        compute_metrics=accuracy,
        callbacks=callbacks,
    )


def test_hyperparameter_search_on_a_transformers_model(tmp_path: Path) -> None:
    Recorder.seen_at_train_begin = []
    recorder, early_stopping = Recorder(), EarlyStoppingCallback(early_stopping_patience=1)
    trainer = make_trainer(tmp_path, [recorder, early_stopping])
    args_before = trainer.args.to_dict()
    finished: list = []

    best = trainer.hyperparameter_search(
        hp_space=lambda trial: {"learning_rate": trial.suggest_float("learning_rate", 1e-4, 1e-2, log=True)},
        compute_objective=lambda metrics: metrics["eval_accuracy"],
        n_trials=3,
        direction="maximize",
        backend="optuna",
        sampler=optuna.samplers.RandomSampler(seed=0),
        callbacks=[lambda study, trial: finished.append(trial)],
    )

    assert isinstance(best, BestRun)
    assert best.run_id in {"0", "1", "2"}
    assert set(best.hyperparameters) == {"learning_rate"}
    assert best.objective == max(t.value for t in finished)
    assert best.hyperparameters == finished[int(best.run_id)].params
    # The trainer's own arguments and callbacks are untouched; each trial had fresh callback instances.
    assert trainer.args.to_dict() == args_before
    assert recorder.evaluations == 0
    assert early_stopping.early_stopping_patience_counter == 0
    ids = [id(instance) for instance, _ in Recorder.seen_at_train_begin]  # all alive: distinct ids
    assert len(ids) == 3 and len(set(ids)) == 3 and id(recorder) not in ids
    assert all(evaluations == 0 for _, evaluations in Recorder.seen_at_train_begin)


def test_model_init_taking_the_trial_and_best_of_evaluations(tmp_path: Path) -> None:
    def model_init(trial):
        hidden = 16 if trial is None else trial.suggest_categorical("hidden", [8, 16])
        return tiny_bert(hidden)

    trainer = make_trainer(tmp_path, [], model_init=model_init)
    study_trials: list = []
    best = trainer.hyperparameter_search(
        hp_space=lambda trial: {"learning_rate": trial.suggest_float("learning_rate", 1e-3, 1e-2, log=True)},
        n_trials=2,
        direction="minimize",
        compute_objective=lambda metrics: metrics["eval_loss"],
        callbacks=[lambda study, trial: study_trials.append(trial)],
        sampler=optuna.samplers.RandomSampler(seed=1),
    )
    assert set(best.hyperparameters) == {"learning_rate", "hidden"}
    assert best.objective == min(t.value for t in study_trials)
    for trial in study_trials:
        # A trial's value is its best evaluation (eval at steps 3 and 6), recorded with its step.
        assert trial.user_attrs["best_step"] in (3, 6)


def test_default_objective_and_refusals(tmp_path: Path) -> None:
    assert default_compute_objective({"eval_loss": 0.5, "epoch": 1.0, "eval_runtime": 3.0}) == 0.5
    metrics = {"eval_loss": 0.5, "eval_accuracy": 0.75, "eval_f1": 0.5, "eval_samples_per_second": 9.0}
    assert default_compute_objective(metrics) == 1.25
    trainer = Trainer(model=tiny_bert(), args=TrainingArguments(output_dir=str(tmp_path), disable_tqdm=True))
    with pytest.raises(RuntimeError, match="model_init"):
        trainer.hyperparameter_search(n_trials=1)
    with pytest.raises(ValueError, match="only the 'optuna' backend"):
        make_trainer(tmp_path, []).hyperparameter_search(n_trials=1, backend="ray")


def test_report_to_gives_each_trial_its_own_tensorboard_folder_and_wandb_run(
    tmp_path: Path, monkeypatch
) -> None:
    import wandb
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from wandb_files import offline_runs

    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    wandb.teardown()  # wandb reads WANDB_DIR when it sets up, once a process: an earlier test's setup would win
    trainer = make_trainer(tmp_path, [], report_to=["tensorboard", "wandb"])
    try:
        trainer.hyperparameter_search(
            hp_space=lambda trial: {
                "learning_rate": trial.suggest_float("learning_rate", 1e-4, 1e-2, log=True)
            },
            n_trials=2,
            direction="minimize",
            backend="optuna",
        )
    finally:
        wandb.finish()  # the last trial's run, as the script's exit would
        wandb.teardown()
    runs = sorted({e.parent for e in (tmp_path / "search").rglob("events.out.tfevents.*")})
    # transformers' folder for a trial: <output_dir>/runs/<date>_<host>/<trial name> (output_dir: run-<n> here)
    assert [(run.parts[-4], run.parts[-3], run.name) for run in runs] == [
        ("run-0", "runs", "run-0"),
        ("run-1", "runs", "run-1"),
    ]
    for run in runs:
        events = EventAccumulator(str(run)).Reload()
        assert [e.step for e in events.Scalars("eval/loss")] == [3, 6]
        assert b"learning_rate" in events.summary_metadata["_hparams_/session_start_info"].plugin_data.content
    assert sorted(run.name for run in offline_runs(tmp_path)) == ["run-0", "run-1"]  # one wandb run per trial
