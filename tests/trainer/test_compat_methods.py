"""The public Trainer and TrainingArguments methods user code calls in transformers exist and do the same here."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from trainer_tasks import Regression, make_model, quiet_args

from trainer import Trainer, TrainingArguments
from trainer.public_api import EvalLoopOutput


def make_trainer(tmp_path, **fields) -> Trainer:
    return Trainer(
        model=make_model(),
        args=quiet_args(tmp_path, **fields),
        train_dataset=Regression(32),
        eval_dataset=Regression(12),
    )


def test_optimizer_and_scheduler_are_built_on_demand_and_report_their_rates(tmp_path):
    trainer = make_trainer(tmp_path, learning_rate=0.1, warmup_steps=2, weight_decay=0.01)
    with pytest.raises(ValueError, match="no optimizer yet"):
        trainer.get_learning_rates()
    trainer.create_optimizer_and_scheduler(num_training_steps=10)
    assert trainer.get_learning_rates() == [0.0, 0.0]  # two groups (decay, no decay), warming up from 0
    trainer.optimizer.step()
    trainer.lr_scheduler.step()
    assert trainer.get_learning_rates() == pytest.approx([0.05, 0.05])
    names = trainer.get_decay_parameter_names(trainer.model)
    assert names == ["net.0.weight", "net.3.weight"]
    assert trainer.get_optimizer_group(trainer.model.net[0].bias)["weight_decay"] == 0.0
    cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(trainer.args)
    assert cls is torch.optim.AdamW and kwargs["lr"] == 0.1 and kwargs["betas"] == (0.9, 0.999)


def test_counts_parameters_examples_and_flos(tmp_path):
    trainer = make_trainer(tmp_path)
    assert trainer.get_num_trainable_parameters() == 6 * 16 + 16 + 16 + 1
    assert trainer.num_examples(trainer.get_eval_dataloader()) == 12
    assert trainer.floating_point_ops({"x": torch.zeros(2, 6)}) == 0  # a plain module has no flos formula
    trainer.current_flos = 1234.0
    trainer.store_flos()
    assert (trainer.state.total_flos, trainer.current_flos) == (1234.0, 0.0)


def test_evaluation_loop_is_the_method_evaluate_and_predict_go_through(tmp_path):
    calls = []

    class Counting(Trainer):
        def evaluation_loop(self, dataloader, description, prediction_loss_only=None, ignore_keys=None,
                            metric_key_prefix="eval"):  # fmt: skip
            calls.append(description)
            return super().evaluation_loop(dataloader, description, prediction_loss_only, ignore_keys,
                                           metric_key_prefix)  # fmt: skip

    trainer = Counting(model=make_model(), args=quiet_args(tmp_path), eval_dataset=Regression(12))
    output = trainer.evaluation_loop(trainer.get_eval_dataloader(), "Evaluation")
    assert isinstance(output, EvalLoopOutput) and output.num_samples == 12
    assert output.predictions.shape == (12,) and "eval_loss" in output.metrics
    trainer.evaluate()
    trainer.predict(Regression(4))
    assert calls == ["Evaluation", "Evaluation", "Prediction"]


def test_call_model_init_passes_the_trial_to_a_one_argument_model_init(tmp_path):
    seen = []

    def model_init(trial):
        seen.append(trial)
        return make_model()

    trainer = Trainer(model_init=model_init, args=quiet_args(tmp_path))
    assert isinstance(trainer.call_model_init("trial-7"), torch.nn.Module)
    assert seen == [None, "trial-7"]


def test_compute_loss_runs_inside_the_context_manager_a_subclass_provides(tmp_path):
    entered = []

    class Tracing(Trainer):
        def compute_loss_context_manager(self):
            entered.append(self.state.global_step)
            return super().compute_loss_context_manager()

    Tracing(model=make_model(), args=quiet_args(tmp_path, max_steps=3), train_dataset=Regression(32)).train()
    assert entered == [0, 1, 2]


def test_bf16_autocast_is_the_smart_context_manager(tmp_path):
    trainer = make_trainer(tmp_path, bf16=True, use_cpu=True)
    with trainer.autocast_smart_context_manager():
        out = torch.nn.Linear(4, 4)(torch.ones(2, 4))
    assert out.dtype == torch.bfloat16


def test_arguments_to_json_string_and_process_facts(tmp_path):
    args = TrainingArguments(output_dir=str(tmp_path), eval_strategy="steps", logging_steps=25)
    values = json.loads(args.to_json_string())
    assert values["eval_steps"] == 25 and values["eval_strategy"] == "steps"
    assert (args.should_log, args.process_index, args.world_size, args.n_gpu >= 0) == (True, 0, 1, True)


def test_example_script_logging_and_state_files_come_from_the_main_process_only(tmp_path, capsys):
    class OtherRank(Trainer):  # what a process other than the main one answers
        def is_world_process_zero(self) -> bool:
            return False

    trainer = OtherRank(model=make_model(), args=quiet_args(tmp_path))
    trainer.log_metrics("train", {"train_loss": 0.5})
    trainer.save_metrics("train", {"train_loss": 0.5})
    trainer.save_state()
    assert capsys.readouterr().out == "" and not list(tmp_path.iterdir())
    assert trainer.metrics_format(
        {"train_runtime": 3725.5, "total_flos": 3 * 2**30, "x_mem_gpu": 5 * 2**20}
    ) == {
        "train_runtime": "1:02:05.50",
        "total_flos": "3GF",
        "x_mem_gpu": "5MB",
    }


def test_a_checkpoint_of_a_transformers_model_loads_with_from_pretrained(tmp_path):
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(
        vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    )
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(config)
    data = [{"input_ids": torch.randint(0, 32, (6,)), "labels": torch.tensor(i % 2)} for i in range(8)]
    args = quiet_args(tmp_path, max_steps=2, save_strategy="steps", save_steps=2)
    Trainer(model=model, args=args, train_dataset=data).train()
    loaded = transformers.BertForSequenceClassification.from_pretrained(str(tmp_path / "checkpoint-2"))
    for name, tensor in model.state_dict().items():  # trained on the GPU where one is there
        assert torch.equal(loaded.state_dict()[name], tensor.cpu()), name


def test_positional_arguments_follow_transformers_order_and_optimizer_cls_and_kwargs(tmp_path):
    tokenizer = object()
    trainer = Trainer(make_model(), quiet_args(tmp_path, max_steps=1), None, Regression(16), None, tokenizer)
    assert trainer.processing_class is tokenizer
    trainer = Trainer(
        model=make_model(),
        args=quiet_args(tmp_path, max_steps=1),
        train_dataset=Regression(16),
        optimizer_cls_and_kwargs=(torch.optim.SGD, {"lr": 0.5, "momentum": 0.9}),
    )
    trainer.train()
    assert isinstance(trainer.optimizer, torch.optim.SGD) and trainer.optimizer.defaults["momentum"] == 0.9


def test_ignore_keys_leave_model_outputs_out_of_the_predictions(tmp_path):
    class TwoHeads(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Linear(6, 1)

        def forward(self, x, labels=None):
            out = self.net(x).squeeze(-1)
            return {"first": out, "second": out * 2}

    trainer = Trainer(model=TwoHeads(), args=quiet_args(tmp_path))
    both = trainer.predict(Regression(4)).predictions
    assert isinstance(both, tuple) and len(both) == 2
    one = trainer.predict(Regression(4), ignore_keys=["second"]).predictions
    np.testing.assert_array_equal(one, both[0])


@pytest.mark.parametrize(
    ("name", "function"),
    [
        ("cosine_with_min_lr", "get_cosine_with_min_lr_schedule_with_warmup"),
        ("cosine_warmup_with_min_lr", "get_cosine_with_min_lr_schedule_with_warmup_lr_rate"),
    ],
)
def test_min_lr_schedules_follow_transformers_step_by_step(tmp_path, name, function):
    optimization = pytest.importorskip("transformers.optimization")
    args = quiet_args(tmp_path, lr_scheduler_type=name, lr_scheduler_kwargs={"min_lr": 1e-3}, warmup_steps=3)
    trainer = Trainer(model=make_model(), args=args)
    trainer.create_optimizer_and_scheduler(num_training_steps=12)
    reference = torch.optim.SGD(make_model().parameters(), lr=args.learning_rate)
    theirs = getattr(optimization, function)(
        reference, num_warmup_steps=3, num_training_steps=12, min_lr=1e-3
    )
    for _ in range(12):
        assert trainer.get_learning_rates()[0] == pytest.approx(reference.param_groups[0]["lr"], abs=1e-12)
        trainer.optimizer.step()
        trainer.lr_scheduler.step()
        reference.step()
        theirs.step()
    assert min(group["lr"] for group in reference.param_groups) >= 1e-3 - 1e-12  # never below min_lr


class ScaleNorm(torch.nn.Module):
    """A norm transformers does not know by type: decayed or not by the name it is given."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * x / x.norm(dim=-1, keepdim=True).clamp_min(1e-6)


class Mixed(torch.nn.Module):
    """Linear, LayerNorm, Embedding, biases, custom norms (one named like a norm, one not) and a bare 1-d scale."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(10, 6)
        self.proj = torch.nn.Linear(6, 6)
        self.layer_norm = torch.nn.LayerNorm(6)
        self.ln = torch.nn.LayerNorm(6)  # excluded by type, whatever its name
        self.blocks = torch.nn.ModuleList([torch.nn.Linear(6, 6, bias=False), ScaleNorm(6)])
        self.q_norm = ScaleNorm(6)
        self.norm = ScaleNorm(6)
        self.head = torch.nn.Linear(6, 1)
        self.scale = torch.nn.Parameter(torch.ones(6))

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        hidden = self.ln(self.layer_norm(self.proj(self.embed(input_ids))))
        hidden = self.norm(self.q_norm(self.blocks[1](self.blocks[0](hidden)))) * self.scale
        logits = self.head(hidden).mean(dim=(1, 2))
        return (
            {"logits": logits}
            if labels is None
            else {"loss": ((logits - labels) ** 2).mean(), "logits": logits}
        )


def test_weight_decay_applies_to_the_parameters_transformers_decays(tmp_path):
    transformers = pytest.importorskip("transformers")
    ours = Trainer(model=Mixed(), args=quiet_args(tmp_path, weight_decay=0.1))
    theirs = transformers.Trainer(
        model=Mixed(),
        args=transformers.TrainingArguments(str(tmp_path / "hf"), weight_decay=0.1, report_to=[]),
    )
    names = ours.get_decay_parameter_names(ours.model)
    assert names == theirs.get_decay_parameter_names(theirs.model)
    # 1-d tensors are decayed too (the embedding, a custom norm not named as one, a bare scale), as there
    assert set(names) == {
        "embed.weight",
        "proj.weight",
        "blocks.0.weight",
        "blocks.1.weight",
        "head.weight",
        "scale",
    }
    ours.create_optimizer_and_scheduler(num_training_steps=4)
    their_groups = theirs.create_optimizer().param_groups
    parameters = dict(ours.model.named_parameters())
    their_names = {id(p): name for name, p in theirs.model.named_parameters()}
    for mine, other in zip(ours.optimizer.param_groups, their_groups, strict=True):
        assert mine["weight_decay"] == other["weight_decay"]
        assert [id(p) for p in mine["params"]] == [
            id(parameters[their_names[id(p)]]) for p in other["params"]
        ]


def test_a_subclass_overriding_get_decay_parameter_names_changes_the_optimizer_groups(tmp_path):
    class NoDecay(Trainer):
        def get_decay_parameter_names(self, model):
            return []

    trainer = NoDecay(model=Mixed(), args=quiet_args(tmp_path, weight_decay=0.1))
    trainer.create_optimizer_and_scheduler(num_training_steps=4)
    decayed, rest = trainer.optimizer.param_groups
    assert decayed["params"] == [] and len(rest["params"]) == len(list(trainer.model.parameters()))
