"""transformers' tests/trainer/test_training_args.py, case by case: each behaviour is checked on our
TrainingArguments and on transformers' own, so that a difference shows as a failure of ours alone."""

from __future__ import annotations

import os

import pytest

from trainer import TrainingArguments

transformers = pytest.importorskip("transformers")


@pytest.fixture(params=["ours", "transformers"])
def Args(request, tmp_path):  # noqa: N802 (a class, as the tests use it)
    """TrainingArguments of either package, writing under tmp_path unless output_dir is given."""
    cls = TrainingArguments if request.param == "ours" else transformers.TrainingArguments

    def build(**fields):
        fields.setdefault("output_dir", str(tmp_path / "out"))
        fields.setdefault("report_to", "none")
        return cls(**fields)

    return build


def test_output_dir_defaults_when_none_and_expands_the_home_directory(Args):
    assert Args(output_dir=None).output_dir == "trainer_output"
    assert Args(output_dir="~/foo").output_dir == os.path.expanduser("~/foo")


def test_building_the_arguments_creates_no_directory(Args, tmp_path):
    Args(output_dir=str(tmp_path / "run"), save_strategy="steps", save_steps=1)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("bad", [1.0, "none", -1, 0])
def test_torch_empty_cache_steps_is_a_positive_integer_or_none(Args, bad):
    assert Args(torch_empty_cache_steps=None).torch_empty_cache_steps is None
    assert Args(torch_empty_cache_steps=1).torch_empty_cache_steps == 1
    with pytest.raises(ValueError):
        Args(torch_empty_cache_steps=bad)


def test_strategy_names_become_their_values_and_unknown_ones_are_refused(Args):
    args = Args(eval_strategy="steps", eval_steps=10, save_strategy="epoch", lr_scheduler_type="linear")
    assert (args.eval_strategy, args.save_strategy, args.lr_scheduler_type) == ("steps", "epoch", "linear")
    with pytest.raises(ValueError):
        Args(eval_strategy="invalid_strategy")


def test_an_eval_strategy_turns_do_eval_on_and_eval_steps_follow_logging_steps(Args):
    assert Args(do_eval=False, eval_strategy="steps", eval_steps=10).do_eval is True
    assert Args(eval_strategy="steps", logging_steps=10).eval_steps == 10


@pytest.mark.parametrize(
    "fields",
    [
        {"eval_strategy": "steps", "logging_steps": 0},
        {"logging_strategy": "steps", "logging_steps": 0},
        {"logging_strategy": "steps", "logging_steps": 10.5},
        {"eval_strategy": "steps", "eval_steps": 10.5},
        {"save_strategy": "steps", "save_steps": 10.5},
    ],
)
def test_step_intervals_are_positive_and_whole_above_one(Args, fields):
    with pytest.raises(ValueError):
        Args(**fields)


def test_a_step_interval_below_one_is_a_fraction_of_the_run(Args):
    assert Args(logging_strategy="steps", logging_steps=0.5).logging_steps == 0.5


@pytest.mark.parametrize(
    "fields",
    [
        {"eval_strategy": "steps", "eval_steps": 10, "save_strategy": "epoch"},
        {"eval_strategy": "steps", "eval_steps": 10, "save_strategy": "steps", "save_steps": 15},
    ],
)
def test_load_best_model_needs_every_save_to_follow_an_evaluation(Args, fields):
    with pytest.raises(ValueError):
        Args(load_best_model_at_end=True, **fields)


def test_load_best_model_accepts_saves_on_a_multiple_of_the_evaluations(Args):
    args = Args(load_best_model_at_end=True, eval_strategy="steps", eval_steps=10, save_steps=20)
    assert args.load_best_model_at_end


@pytest.mark.parametrize(("metric", "resolved", "greater"), [(None, "loss", False), ("eval_loss", "eval_loss", False), ("accuracy", "accuracy", True)])  # fmt: skip
def test_the_best_model_metric_and_its_direction_default_from_its_name(Args, metric, resolved, greater):
    args = Args(
        load_best_model_at_end=True,
        eval_strategy="epoch",
        save_strategy="epoch",
        metric_for_best_model=metric,
    )
    assert (args.metric_for_best_model, args.greater_is_better) == (resolved, greater)


def test_fp16_and_bf16_cannot_both_be_on(Args):
    with pytest.raises(ValueError):
        Args(fp16=True, bf16=True)
    with pytest.raises(ValueError):
        Args(fp16_full_eval=True, bf16_full_eval=True)


def test_reduce_lr_on_plateau_needs_evaluations(Args):
    with pytest.raises(ValueError):
        Args(lr_scheduler_type="reduce_lr_on_plateau", eval_strategy="no")


def test_a_compile_mode_or_backend_turns_torch_compile_on(Args):
    assert Args(torch_compile_mode="reduce-overhead").torch_compile is True
    assert Args(torch_compile_backend="inductor").torch_compile is True


@pytest.mark.parametrize(
    ("given", "expected"), [("none", []), (["none"], []), ("tensorboard", ["tensorboard"])]
)
def test_report_to_none_is_an_empty_list_and_a_name_a_list_of_one(Args, given, expected):
    assert Args(report_to=given).report_to == expected


def test_warmup_steps_below_one_are_a_fraction_of_the_training_steps(Args):
    with pytest.raises(ValueError):
        Args(warmup_steps=-1)
    assert Args(warmup_steps=0).get_warmup_steps(10) == 0
    assert Args(warmup_steps=0.5).get_warmup_steps(10) == 5
    assert Args(warmup_steps=0.25).get_warmup_steps(10) == 3  # rounded up
    assert Args(warmup_steps=3).get_warmup_steps(10) == 3


def test_a_prefetch_factor_needs_worker_processes(Args):
    with pytest.raises(ValueError):
        Args(dataloader_prefetch_factor=2, dataloader_num_workers=0)
    assert Args(dataloader_prefetch_factor=2, dataloader_num_workers=2).dataloader_prefetch_factor == 2


def test_use_cpu_turns_pin_memory_off(Args):
    assert Args(use_cpu=True).dataloader_pin_memory is False
    assert Args().dataloader_pin_memory is True


def test_include_num_input_tokens_seen_takes_a_boolean(Args):
    assert Args(include_num_input_tokens_seen=True).include_num_input_tokens_seen == "all"
    assert Args(include_num_input_tokens_seen=False).include_num_input_tokens_seen == "no"


def test_dict_fields_take_json_strings_from_the_command_line(Args):
    assert Args(lr_scheduler_kwargs='{"factor": 0.5}').lr_scheduler_kwargs == {"factor": 0.5}
    kwargs = Args(
        gradient_checkpointing_kwargs='{"use_reentrant": "false", "n": "3"}'
    ).gradient_checkpointing_kwargs
    assert kwargs == {"use_reentrant": False, "n": 3}  # string values read as transformers reads them
