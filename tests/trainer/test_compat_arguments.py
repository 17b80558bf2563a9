"""Every field of transformers' TrainingArguments is accepted; the ones that apply work as there, the others are
refused in one line naming the field when set."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pytest
import torch
from trainer_tasks import Regression, make_model, quiet_args

from trainer import Trainer, TrainerCallback, TrainerConfigError, TrainingArguments
from trainer.args_unsupported import UNSUPPORTED
from trainer.label_smoothing import label_smoothed_loss

transformers = pytest.importorskip("transformers")


def tiny_bert(cls=None):
    config = transformers.BertConfig(
        vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=16, num_labels=3,
    )  # fmt: skip
    torch.manual_seed(0)
    return (cls or transformers.BertForSequenceClassification)(config)


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n: int = 16, padded: int = 0) -> None:
        generator = torch.Generator().manual_seed(0)
        self.ids = torch.randint(1, 32, (n, 8), generator=generator)
        self.mask = torch.ones(n, 8, dtype=torch.long)
        self.mask[:, 8 - padded :] = 0
        self.labels = torch.arange(n) % 3

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i):
        return {
            "input_ids": self.ids[i], "attention_mask": self.mask[i], "labels": self.labels[i],
            "unused_column": torch.tensor(7),
        }  # fmt: skip


def test_every_transformers_field_is_a_field_with_the_same_default():
    theirs = {f.name: f for f in dataclasses.fields(transformers.TrainingArguments) if f.init}
    ours = {f.name: f for f in dataclasses.fields(TrainingArguments)}
    assert set(theirs) <= set(ours), sorted(set(theirs) - set(ours))
    # deliberate differences of default, each listed in docs/compat.md
    differ = {"output_dir", "optim", "gradient_checkpointing", "disable_tqdm"}
    for name, field in theirs.items():
        if name in differ or field.default is dataclasses.MISSING:
            continue
        assert ours[name].default == field.default, name


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_a_field_that_cannot_apply_is_refused_in_one_line_naming_it(tmp_path, name):
    value = {"push_to_hub": True, "hub_strategy": "end", "debug": "underflow_overflow", "project": "x"}.get(
        name
    )
    default = next(f.default for f in dataclasses.fields(TrainingArguments) if f.name == name)
    if value is None:
        value = (not default) if isinstance(default, bool) else "something"
    with pytest.raises(TrainerConfigError) as refused:
        TrainingArguments(output_dir=str(tmp_path), **{name: value})
    message = str(refused.value)
    assert f"'{name}'" in message and "\n" not in message


def test_label_smoothing_matches_transformers_label_smoother(tmp_path):
    from transformers.trainer_pt_utils import LabelSmoother

    logits = torch.randn(4, 5, 7)
    labels = torch.randint(0, 7, (4, 5))
    labels[0, :2] = -100
    theirs = LabelSmoother(epsilon=0.1)({"logits": logits}, labels, shift_labels=True)
    torch.testing.assert_close(label_smoothed_loss(logits, labels, 0.1, shift_labels=True), theirs)

    model = tiny_bert()
    trainer = Trainer(model=model, args=quiet_args(tmp_path, label_smoothing_factor=0.2))
    generator = torch.Generator().manual_seed(1)
    inputs = {
        "input_ids": torch.randint(1, 32, (4, 8), generator=generator),
        "labels": torch.tensor([0, 1, 2, 0]),
    }
    model.eval()
    loss = trainer.compute_loss(model, inputs)
    logits = model(input_ids=inputs["input_ids"]).logits
    torch.testing.assert_close(loss, LabelSmoother(epsilon=0.2)({"logits": logits}, inputs["labels"]))
    assert abs(loss.item() - model(**inputs).loss.item()) > 1e-4  # not the model's own (unsmoothed) loss


def test_unused_columns_are_dropped_and_can_be_kept(tmp_path):
    trainer = Trainer(model=tiny_bert(), args=quiet_args(tmp_path, max_steps=2), train_dataset=Tokens())
    trainer.train()  # BertForSequenceClassification.forward takes no 'unused_column'
    batch = next(iter(trainer.get_train_dataloader()))
    assert set(batch) == {"input_ids", "attention_mask", "labels"}
    keeping = Trainer(model=tiny_bert(), args=quiet_args(tmp_path, remove_unused_columns=False))
    assert "unused_column" in next(iter(keeping.get_test_dataloader(Tokens())))


def test_include_num_input_tokens_seen_logs_all_or_non_padding_tokens(tmp_path):
    for mode, per_sample in (("all", 8), ("non_padding", 5)):
        args = quiet_args(tmp_path, max_steps=2, logging_steps=1, include_num_input_tokens_seen=mode)
        trainer = Trainer(model=tiny_bert(), args=args, train_dataset=Tokens(16, padded=3))
        trainer.train()
        seen = [e["num_input_tokens_seen"] for e in trainer.state.log_history if "loss" in e]
        assert seen == [8 * per_sample, 16 * per_sample]
    assert (
        TrainingArguments(
            output_dir=str(tmp_path), include_num_input_tokens_seen=True
        ).include_num_input_tokens_seen
        == "all"
    )


def test_neftune_adds_noise_to_embeddings_only_while_training(tmp_path):
    model = tiny_bert()
    ids = torch.randint(1, 32, (2, 8))
    seen = {}

    class Probe(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            embeddings = model.get_input_embeddings()
            model.train()
            # the Trainer moved the model to its GPU, if one is there
            on_device = ids.to(embeddings.weight.device)
            seen["train"] = torch.equal(embeddings(on_device), embeddings(on_device))

    args = quiet_args(tmp_path, max_steps=1, neftune_noise_alpha=5.0)
    Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=[Probe()]).train()
    assert seen["train"] is False  # two forwards, two draws of noise
    embeddings = model.get_input_embeddings()
    model.train()
    ids = ids.to(embeddings.weight.device)
    assert torch.equal(embeddings(ids), embeddings(ids))  # the hook is gone after training
    with pytest.raises(
        TrainerConfigError, match="neftune_noise_alpha needs a model with get_input_embeddings"
    ):
        Trainer(model=make_model(), args=args, train_dataset=Regression(16)).train()


def test_batch_eval_metrics_and_include_for_metrics(tmp_path):
    calls = []

    def per_batch(prediction, compute_result):
        calls.append((torch.is_tensor(prediction.predictions), compute_result, len(prediction)))
        return {"batches": len(calls)} if compute_result else None

    args = quiet_args(
        tmp_path, batch_eval_metrics=True, per_device_eval_batch_size=4, include_for_metrics=["loss"]
    )
    trainer = Trainer(model=tiny_bert(), args=args, eval_dataset=Tokens(12), compute_metrics=per_batch)
    assert trainer.evaluate()["eval_batches"] == 3
    assert calls == [(True, False, 3), (True, False, 3), (True, True, 3)]

    def whole(prediction):
        predictions, labels, inputs, losses = prediction
        return {"inputs": float(inputs.shape[0]), "losses": float(losses.shape[0])}

    args = quiet_args(tmp_path, include_for_metrics=["inputs", "loss"], per_device_eval_batch_size=5)
    metrics = Trainer(model=tiny_bert(), args=args, eval_dataset=Tokens(12), compute_metrics=whole).evaluate()
    assert (metrics["eval_inputs"], metrics["eval_losses"]) == (12.0, 12.0)


def test_eval_accumulation_steps_give_the_same_predictions(tmp_path):
    outputs = []
    for steps in (None, 2):
        args = quiet_args(tmp_path, eval_accumulation_steps=steps, per_device_eval_batch_size=3)
        outputs.append(Trainer(model=tiny_bert(), args=args).predict(Tokens(10)).predictions)
    np.testing.assert_array_equal(*outputs)


def test_bf16_full_eval_casts_the_model_for_a_standalone_evaluation(tmp_path):
    model = tiny_bert()
    trainer = Trainer(
        model=model, args=quiet_args(tmp_path, bf16_full_eval=True, use_cpu=True), eval_dataset=Tokens()
    )
    trainer.evaluate()
    assert next(trainer.model.parameters()).dtype == torch.bfloat16


def test_gradient_checkpointing_kwargs_and_the_transformers_5_name(tmp_path):
    args = quiet_args(
        tmp_path, max_steps=1, activation_checkpointing=True,
        activation_checkpointing_kwargs={"use_reentrant": False},
    )  # fmt: skip
    assert args.gradient_checkpointing and args.gradient_checkpointing_kwargs == {"use_reentrant": False}
    model = tiny_bert()
    Trainer(model=model, args=args, train_dataset=Tokens()).train()
    assert model.is_gradient_checkpointing


def test_compile_backend_turns_compile_on_and_tf32_is_set(tmp_path):
    args = TrainingArguments(
        output_dir=str(tmp_path), torch_compile_backend="eager", torch_compile_mode="default"
    )
    assert args.torch_compile
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        args = quiet_args(tmp_path, max_steps=1, tf32=True)
        Trainer(model=make_model(), args=args, train_dataset=Regression(16)).train()
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def test_log_level_sets_the_trainer_logger(tmp_path):
    logger = logging.getLogger("trainer")
    before = logger.level
    try:
        Trainer(model=make_model(), args=quiet_args(tmp_path, log_level="error"))
        assert logger.level == logging.ERROR
    finally:
        logger.setLevel(before)


def test_values_are_checked_with_one_line_errors(tmp_path):
    for fields, match in (
        ({"label_smoothing_factor": 1.5}, "'label_smoothing_factor' must be in"),
        ({"log_level": "loud"}, "'log_level' is 'loud'"),
        ({"include_for_metrics": ["logits"]}, "'include_for_metrics' may hold"),
        ({"dataloader_prefetch_factor": 2}, "need worker processes"),
        ({"ddp_static_graph": True, "strategy": "single"}, "apply to strategy 'ddp' only"),
    ):
        with pytest.raises(TrainerConfigError, match=match):
            TrainingArguments(output_dir=str(tmp_path), **fields)


def test_script_fields_and_the_launchers_local_rank(tmp_path, monkeypatch):
    args = TrainingArguments(
        output_dir=str(tmp_path), do_train=True, resume_from_checkpoint="x", eval_strategy="epoch"
    )
    assert (args.do_train, args.do_eval, args.resume_from_checkpoint) == (True, True, "x")
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert TrainingArguments(output_dir=str(tmp_path), local_rank=-1).local_rank == 3


def test_the_default_collator_renames_label_and_drops_strings_as_transformers_does(tmp_path):
    class Named(Tokens):
        def __getitem__(self, i):
            sample = super().__getitem__(i)
            return {"input_ids": sample["input_ids"], "label": int(sample["labels"]), "text": f"sample {i}"}

    trainer = Trainer(model=tiny_bert(), args=quiet_args(tmp_path, max_steps=2), train_dataset=Named())
    batch = next(iter(trainer.get_train_dataloader()))
    assert set(batch) == {"input_ids", "labels"} and batch["labels"].dtype == torch.long
    assert trainer.train().global_step == 2


def test_best_model_fields_are_resolved_as_transformers_resolves_them(tmp_path):
    accuracy = TrainingArguments(output_dir=str(tmp_path), metric_for_best_model="accuracy")
    assert accuracy.greater_is_better is True  # ported callbacks read it directly
    best = TrainingArguments(
        output_dir=str(tmp_path), load_best_model_at_end=True, eval_strategy="epoch", save_strategy="epoch"
    )
    assert (best.metric_for_best_model, best.greater_is_better) == ("loss", False)


def confident_bert():
    """A tiny BERT far from uniform predictions, where smoothing changes the loss a lot."""
    model = tiny_bert()
    with torch.no_grad():
        model.classifier.weight.mul_(200.0)
    return model


def test_label_smoothing_smooths_the_evaluation_loss_as_transformers_does(tmp_path):
    fields = dict(label_smoothing_factor=0.2, per_device_eval_batch_size=5, report_to="none")
    trainer = Trainer(model=confident_bert(), args=quiet_args(tmp_path, **fields))
    ours = trainer.evaluate(Tokens(12))
    assert trainer.predict(Tokens(12)).predictions.shape == (12, 3)  # the logits still come back
    theirs = transformers.Trainer(
        model=confident_bert(), args=transformers.TrainingArguments(str(tmp_path / "hf"), **fields)
    ).evaluate(Tokens(12))
    assert ours["eval_loss"] == pytest.approx(theirs["eval_loss"], rel=1e-5)
    unsmoothed = Trainer(model=confident_bert(), args=quiet_args(tmp_path)).evaluate(Tokens(12))
    assert abs(ours["eval_loss"] - unsmoothed["eval_loss"]) > 1e-3  # smoothing changed the number
