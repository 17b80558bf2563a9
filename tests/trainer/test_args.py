"""TrainingArguments: validation messages that name the field and the fix, and serialisation round trips."""

from __future__ import annotations

import dataclasses

import pytest

from trainer import IntervalStrategy, TrainerConfigError, TrainingArguments


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"learning_rate": "fast"}, "'learning_rate' must be a number (got 'fast')"),
        ({"per_device_train_batch_size": 0}, "'per_device_train_batch_size' must be > 0"),
        (
            {"gradient_accumulation_steps": 2.5},
            "'gradient_accumulation_steps' must be a whole number (got 2.5)",
        ),
        ({"optim": "adam"}, "'optim' is 'adam'; choose one of"),
        ({"lr_scheduler_type": "cosin"}, "Did you mean 'cosine'?"),
        ({"eval_strategy": "step"}, "Did you mean 'steps'?"),
        ({"save_strategy": "always"}, "'save_strategy' is 'always'"),
        ({"logging_steps": 2.5}, "'logging_steps' must be a whole number of steps"),
        ({"adam_beta2": 1.0}, "'adam_beta2' must be in [0, 1)"),
        ({"warmup_ratio": 1.5}, "'warmup_ratio' must be in [0, 1]"),
        ({"bf16": True, "fp16": True}, "choose one mixed-precision mode"),
        ({"save_total_limit": 0}, "'save_total_limit' must be >= 1"),
        ({"max_steps": -1, "num_train_epochs": 0}, "set 'num_train_epochs' > 0 or 'max_steps' > 0"),
        ({"load_best_model_at_end": True}, "'load_best_model_at_end' needs evaluations"),
        (
            {"load_best_model_at_end": True, "eval_strategy": "epoch", "save_strategy": "steps"},
            "needs save_strategy (steps) to match eval_strategy (epoch)",
        ),
        (
            {"load_best_model_at_end": True, "eval_strategy": "steps", "eval_steps": 3, "save_steps": 10},
            "save_steps (10) to be a multiple of eval_steps (3)",
        ),
        (
            {"save_strategy": "best", "eval_strategy": "epoch"},
            "save_strategy 'best' needs 'metric_for_best_model'",
        ),
        ({"lr_scheduler_type": "reduce_on_plateau"}, "'reduce_on_plateau' needs evaluations"),
        ({"max_non_finite_steps": 0}, "'max_non_finite_steps' must be > 0"),
        ({"strategy": "horovod"}, "'strategy' is 'horovod'"),
    ],
)
def test_bad_arguments_name_the_field_and_the_fix(tmp_path, fields, message):
    with pytest.raises(TrainerConfigError) as error:
        TrainingArguments(output_dir=str(tmp_path), **fields)
    assert message in str(error.value)
    assert isinstance(error.value, ValueError)


def test_from_dict_rejects_an_unknown_key_with_a_suggestion():
    with pytest.raises(
        TrainerConfigError, match="unknown training argument 'learnig_rate'. Did you mean 'learning_rate'"
    ):
        TrainingArguments.from_dict({"learnig_rate": 1e-3})


def test_round_trips_through_dict_json_and_yaml(tmp_path):
    args = TrainingArguments(
        output_dir=str(tmp_path),
        learning_rate=3e-4,
        eval_strategy="steps",
        eval_steps=0.25,
        report_to="wandb",
        lr_scheduler_kwargs={"num_cycles": 2},
        label_names=["labels"],
    )
    assert args.eval_strategy is IntervalStrategy.STEPS
    assert args.to_dict()["eval_strategy"] == "steps"
    assert args.report_to == ["wandb"]
    for again in (
        TrainingArguments.from_dict(args.to_dict()),
        TrainingArguments.from_json(args.to_json()),
        TrainingArguments.from_yaml(args.to_yaml()),
    ):
        assert again == args


def test_replace_revalidates_and_derived_defaults_follow(tmp_path):
    args = TrainingArguments(output_dir=str(tmp_path), logging_steps=10)
    assert args.eval_interval == 10
    assert dataclasses.replace(args, logging_steps=4).eval_interval == 4
    with pytest.raises(TrainerConfigError, match="'learning_rate' must be >= 0"):
        dataclasses.replace(args, learning_rate=-1.0)


@pytest.mark.parametrize(
    ("metric", "higher"), [("loss", False), ("eval_loss", False), ("accuracy", True), ("eval_f1", True)]
)
def test_greater_is_better_defaults_from_the_metric_name(tmp_path, metric, higher):
    args = TrainingArguments(output_dir=str(tmp_path), metric_for_best_model=metric)
    assert args.higher_is_better is higher
    assert args.best_metric_name.startswith("eval_")
    assert TrainingArguments(
        output_dir=str(tmp_path), metric_for_best_model=metric, greater_is_better=not higher
    ).higher_is_better is (not higher)


def test_load_best_model_defaults_to_eval_loss(tmp_path):
    args = TrainingArguments(
        output_dir=str(tmp_path), load_best_model_at_end=True, eval_strategy="epoch", save_strategy="epoch"
    )
    assert args.best_metric_name == "eval_loss"
    assert args.higher_is_better is False
