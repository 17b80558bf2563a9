"""The training loop on the single-device strategy: batches, losses, logs, evaluation, prediction."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.utils.data import Dataset
from trainer_tasks import DropoutMLP, Regression, TupleMLP, make_model, quiet_args, tuple_regression

from trainer import EvalPrediction, Trainer, TrainerCallback, TrainerConfigError, TrainerError


def test_dict_batches_train_and_the_loss_falls(tmp_path):
    args = quiet_args(tmp_path, num_train_epochs=8, logging_steps=8, learning_rate=3e-2)
    trainer = Trainer(model=make_model(), args=args, train_dataset=Regression(64))
    output = trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert output.global_step == 64 and len(losses) == 8
    assert losses[-1] < 0.3 * losses[0]
    assert math.isclose(output.training_loss, np.mean(losses), rel_tol=1e-9)
    assert trainer.state.epoch == 8.0


def test_tuple_batches_are_passed_positionally(tmp_path):
    torch.manual_seed(0)
    trainer = Trainer(
        model=TupleMLP(),
        args=quiet_args(tmp_path, max_steps=30, learning_rate=3e-2),
        train_dataset=tuple_regression(64),
    )
    before = trainer.evaluate(tuple_regression(64))["eval_loss"]
    trainer.train()
    assert trainer.evaluate(tuple_regression(64))["eval_loss"] < before


def test_logs_hold_loss_grad_norm_learning_rate_epoch_and_throughput(tmp_path):
    args = quiet_args(tmp_path, max_steps=6, logging_steps=3, logging_first_step=True, warmup_steps=2)
    trainer = Trainer(model=make_model(), args=args, train_dataset=Regression(64))
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert [entry["step"] for entry in logs] == [1, 3, 6]
    for entry in logs:
        assert {
            "loss",
            "grad_norm",
            "learning_rate",
            "epoch",
            "train_samples_per_second",
            "train_steps_per_second",
        } <= entry.keys()
    assert logs[0]["learning_rate"] == pytest.approx(0.5e-2)  # linear warmup over 2 steps: after step 1
    assert logs[-1]["learning_rate"] == pytest.approx(0.0)
    final = trainer.state.log_history[-1]
    assert {"train_runtime", "train_samples_per_second", "train_loss"} <= final.keys()


def test_fractional_logging_steps_are_a_share_of_max_steps(tmp_path):
    trainer = Trainer(
        model=make_model(),
        args=quiet_args(tmp_path, max_steps=8, logging_steps=0.25),
        train_dataset=Regression(64),
    )
    trainer.train()
    assert trainer.state.logging_steps == 2
    assert [e["step"] for e in trainer.state.log_history if "loss" in e] == [2, 4, 6, 8]


class TokenData(Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        return {"input_ids": torch.arange(5) + i, "labels": torch.tensor(float(i))}


class TokenModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(32, 4)
        self.head = torch.nn.Linear(4, 1)

    def forward(self, input_ids, labels=None):
        logits = self.head(self.embed(input_ids).mean(1)).squeeze(-1)
        return {"loss": torch.nn.functional.mse_loss(logits, labels), "logits": logits}


def test_tokens_are_counted_when_batches_hold_input_ids(tmp_path):
    trainer = Trainer(
        model=TokenModel(),
        args=quiet_args(tmp_path, max_steps=4, logging_steps=2, per_device_train_batch_size=4),
        train_dataset=TokenData(),
    )
    output = trainer.train()
    assert trainer.state.num_input_tokens_seen == 4 * 4 * 5
    assert trainer.state.total_flos == 6 * (4 + 1) * 4 * 4 * 5  # 6 x non-embedding parameters (head) x tokens
    assert "train_tokens_per_second" in trainer.state.log_history[0]
    assert output.metrics["train_tokens_per_second"] > 0


def accuracy_like(prediction: EvalPrediction) -> dict[str, float]:
    predictions, labels = prediction
    assert isinstance(predictions, np.ndarray) and isinstance(labels, np.ndarray)
    return {"mae": float(np.abs(predictions - labels).mean()), "count": len(labels)}


def test_evaluate_feeds_numpy_to_compute_metrics_and_prefixes_each_dataset(tmp_path):
    trainer = Trainer(
        model=make_model(),
        args=quiet_args(tmp_path, per_device_eval_batch_size=7),
        compute_metrics=accuracy_like,
        eval_dataset={"small": Regression(10), "large": Regression(23, seed=3)},
    )
    metrics = trainer.evaluate()
    assert metrics["eval_small_count"] == 10 and metrics["eval_large_count"] == 23
    for name in ("small", "large"):
        assert {
            f"eval_{name}_loss",
            f"eval_{name}_mae",
            f"eval_{name}_runtime",
            f"eval_{name}_samples_per_second",
            f"eval_{name}_steps_per_second",
        } <= metrics.keys()
    single = trainer.evaluate(Regression(10))
    assert single["eval_loss"] == pytest.approx(metrics["eval_small_loss"])
    # the eval loss is the mean over samples, not over batches of unequal size
    model = trainer.model.eval()
    data = Regression(23, seed=3)
    device = next(model.parameters()).device  # the GPU where there is one
    with torch.no_grad():
        expected = torch.nn.functional.mse_loss(model(data.x.to(device))["logits"], data.y.to(device)).item()
    assert metrics["eval_large_loss"] == pytest.approx(expected, rel=1e-5)


def test_predict_returns_predictions_labels_and_metrics(tmp_path):
    seen = []
    trainer = Trainer(
        model=make_model(),
        args=quiet_args(tmp_path, per_device_eval_batch_size=4),
        compute_metrics=accuracy_like,
        preprocess_logits_for_metrics=lambda logits, labels: seen.append(1) or logits * 0,
    )
    output = trainer.predict(Regression(10))
    assert output.predictions.shape == (10,) and np.all(output.predictions == 0)
    np.testing.assert_allclose(output.label_ids, Regression(10).y.numpy())
    assert len(seen) == 3 and "test_loss" in output.metrics and "test_mae" in output.metrics


def test_compute_loss_func_gets_outputs_labels_and_item_count(tmp_path):
    calls = []

    def l1(outputs, labels, num_items_in_batch=None):
        calls.append(num_items_in_batch)
        return (outputs["logits"] - labels).abs().mean()

    class NoLossModel(DropoutMLP):
        def forward(self, x):
            return {"logits": self.net(x).squeeze(-1)}

    torch.manual_seed(0)
    trainer = Trainer(
        model=NoLossModel(),
        args=quiet_args(tmp_path, max_steps=3),
        train_dataset=Regression(32),
        compute_loss_func=l1,
    )
    trainer.train()
    assert calls == [8, 8, 8]
    assert trainer.evaluate(Regression(8))["eval_loss"] > 0


def test_a_model_without_a_loss_gets_a_clear_error(tmp_path):
    class LogitsOnly(DropoutMLP):
        def forward(self, x, labels=None):
            return self.net(x)

    trainer = Trainer(
        model=LogitsOnly(), args=quiet_args(tmp_path, max_steps=1), train_dataset=Regression(16)
    )
    with pytest.raises(TrainerError, match="returned no scalar loss.*compute_loss_func"):
        trainer.train()


def test_model_init_is_called_for_each_train(tmp_path):
    built = []

    def model_init():
        built.append(1)
        return DropoutMLP()

    trainer = Trainer(
        model_init=model_init, args=quiet_args(tmp_path, max_steps=2), train_dataset=Regression(16)
    )
    first = trainer.train()
    second = trainer.train()
    assert len(built) == 2 and first.training_loss == second.training_loss  # seeded, fresh each time
    with pytest.raises(TrainerConfigError, match="needs a model or a model_init"):
        Trainer(args=quiet_args(tmp_path))


def test_eval_and_save_by_steps_and_by_epoch(tmp_path):
    args = quiet_args(
        tmp_path / "steps",
        max_steps=6,
        eval_strategy="steps",
        eval_steps=2,
        save_strategy="steps",
        save_steps=3,
    )
    trainer = Trainer(model=make_model(), args=args, train_dataset=Regression(32), eval_dataset=Regression(8))
    trainer.train()
    assert [e["step"] for e in trainer.state.log_history if "eval_loss" in e] == [2, 4, 6]
    assert sorted(p.name for p in (tmp_path / "steps").iterdir()) == ["checkpoint-3", "checkpoint-6"]

    args = quiet_args(
        tmp_path / "epoch",
        num_train_epochs=2,
        eval_strategy="epoch",
        save_strategy="epoch",
        eval_on_start=True,
    )
    trainer = Trainer(model=make_model(), args=args, train_dataset=Regression(32), eval_dataset=Regression(8))
    trainer.train()
    assert [e["step"] for e in trainer.state.log_history if "eval_loss" in e] == [0, 4, 8]
    assert sorted(p.name for p in (tmp_path / "epoch").iterdir()) == ["checkpoint-4", "checkpoint-8"]


def test_metric_for_best_model_missing_from_the_metrics_is_named(tmp_path):
    args = quiet_args(
        tmp_path, max_steps=2, eval_strategy="steps", eval_steps=1, metric_for_best_model="accuracy"
    )
    trainer = Trainer(model=make_model(), args=args, train_dataset=Regression(16), eval_dataset=Regression(8))
    with pytest.raises(TrainerConfigError, match="no 'eval_accuracy'; the metrics are"):
        trainer.train()


class Stream(torch.utils.data.IterableDataset):
    def __iter__(self):
        data = Regression(32)
        for i in range(len(data)):
            yield data[i]


def test_an_iterable_dataset_trains_for_max_steps(tmp_path):
    trainer = Trainer(model=make_model(), args=quiet_args(tmp_path, max_steps=10), train_dataset=Stream())
    assert trainer.train().global_step == 10  # 4 batches per pass: the stream is read again
    with pytest.raises(TrainerConfigError, match="has no length: set 'max_steps'"):
        Trainer(model=make_model(), args=quiet_args(tmp_path), train_dataset=Stream()).train()


def test_loader_workers_give_the_same_run(tmp_path):
    runs = []
    for workers in (0, 1):
        args = quiet_args(tmp_path / str(workers), max_steps=5, dataloader_num_workers=workers)
        trainer = Trainer(model=make_model(), args=args, train_dataset=Regression(32))
        trainer.train()
        runs.append(trainer.model.state_dict())
    for name in runs[0]:
        assert torch.equal(runs[0][name], runs[1][name])


def test_gradient_checkpointing_needs_a_model_that_supports_it(tmp_path):
    trainer = Trainer(
        model=make_model(),
        args=quiet_args(tmp_path, max_steps=1, gradient_checkpointing=True),
        train_dataset=Regression(16),
    )
    with pytest.raises(TrainerConfigError, match="has no gradient_checkpointing_enable"):
        trainer.train()


def test_ignore_data_skip_restarts_the_current_epoch(tmp_path):
    args = quiet_args(tmp_path, max_steps=6, save_strategy="steps", save_steps=3)  # 4 steps per epoch
    Trainer(model=make_model(), args=args, train_dataset=Regression(32)).train()

    class StepsPerEpoch(TrainerCallback):
        def __init__(self):
            self.epochs: list[int] = []

        def on_epoch_begin(self, args, state, control, **kwargs):
            self.epochs.append(0)

        def on_step_end(self, args, state, control, **kwargs):
            self.epochs[-1] += 1

    for ignore, steps_in_first_epoch in ((False, 1), (True, 4)):
        counter = StepsPerEpoch()
        trainer = Trainer(
            model=make_model(),
            args=quiet_args(tmp_path, max_steps=9, ignore_data_skip=ignore),
            train_dataset=Regression(32),
            callbacks=[counter],
        )
        trainer.train(resume_from_checkpoint=str(tmp_path / "checkpoint-3"))
        # resumed at step 3 of epoch 0: the rest of that epoch is 1 step, or all 4 when the seen batches are not skipped
        assert counter.epochs[0] == steps_in_first_epoch


def test_evaluation_without_an_eval_dataset_fails_before_training(tmp_path):
    trainer = Trainer(
        model=make_model(), args=quiet_args(tmp_path, eval_strategy="epoch"), train_dataset=Regression(16)
    )
    with pytest.raises(
        TrainerConfigError, match="eval_strategy is 'epoch' but the Trainer has no eval_dataset"
    ):
        trainer.train()
    assert trainer.state.global_step == 0
