"""Methods of transformers' Trainer that user code and subclasses call, beyond train/evaluate/predict.

Each does what transformers' does, in this Trainer's terms (the strategy places and wraps the model; the optimizer's
parameter groups follow `get_decay_parameter_names`). Mixed into `Trainer`.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.data import DataLoader

from trainer.data import has_length
from trainer.evaluation import evaluation_loop as run_evaluation_loop
from trainer.optim import _optimizer_class_and_kwargs, decay_parameter_names
from trainer.outputs import EvalLoopOutput  # defined beside PredictionOutput; importable from here as before

if TYPE_CHECKING:
    from trainer.args import TrainingArguments
    from trainer.state import TrainerState
    from trainer.strategies.base import Strategy


class PublicMethodsMixin:
    """Needs `args`, `state`, `strategy`, `model`, `optimizer`, `lr_scheduler` and `model_init` on the Trainer."""

    args: TrainingArguments
    state: TrainerState
    strategy: Strategy
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer | None
    lr_scheduler: Any
    model_init: Any
    current_flos: float = 0.0  # flos counted by user code between store_flos() calls

    # ---- optimizer ----------------------------------------------------------------------------------------------
    def create_optimizer_and_scheduler(self, num_training_steps: int) -> None:
        """Build `self.optimizer` (unless one was given) and `self.lr_scheduler` for `num_training_steps`."""
        if self.optimizer is None:
            self.optimizer = self.create_optimizer()  # type: ignore[attr-defined]
        if self.lr_scheduler is None:
            self.lr_scheduler = self.create_scheduler(num_training_steps, self.optimizer)  # type: ignore[attr-defined]

    @staticmethod
    def get_optimizer_cls_and_kwargs(
        args: TrainingArguments, model: torch.nn.Module | None = None
    ) -> tuple[type, dict[str, Any]]:
        """The optimizer class `args.optim` names and its keyword arguments (lr, betas, eps, optim_args)."""
        cls, kwargs = _optimizer_class_and_kwargs(args)
        return cls, {"lr": args.learning_rate, **kwargs, **(args.optim_args or {})}

    def get_decay_parameter_names(self, model: torch.nn.Module) -> list[str]:
        """The parameters weight decay applies to, as transformers lists them: every one but biases and norm weights
        (LayerNorm modules, and names like `bias`, `norm`, `layernorm`, `rmsnorm`, `*_norm`). `create_optimizer` groups
        by this method, so a subclass that overrides it changes the optimizer's groups, as there."""
        return decay_parameter_names(model)

    def get_learning_rates(self) -> list[float]:
        """The current learning rate of each parameter group."""
        if self.optimizer is None:
            raise ValueError(
                "the Trainer has no optimizer yet: call train() or create_optimizer_and_scheduler()"
            )
        return [group["lr"] for group in self.optimizer.param_groups]

    def get_optimizer_group(self, param: str | torch.nn.Parameter | None = None) -> Any:
        """The optimizer group holding `param`, or every group's parameters when None."""
        if self.optimizer is None:
            raise ValueError(
                "the Trainer has no optimizer yet: call train() or create_optimizer_and_scheduler()"
            )
        if param is not None:
            if isinstance(param, str):
                param = dict(self.strategy.unwrap(self.model).named_parameters())[param]
            for group in self.optimizer.param_groups:
                if any(p is param for p in group["params"]):
                    return group
        return [group["params"] for group in self.optimizer.param_groups]

    def get_num_trainable_parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    # ---- model --------------------------------------------------------------------------------------------------
    def call_model_init(self, trial: Any = None) -> torch.nn.Module:
        """`model_init()`, or `model_init(trial)` when it takes the trial (hyperparameter search)."""
        if self.model_init is None:
            raise ValueError("the Trainer has no model_init")
        return self._call_model_init(trial)  # type: ignore[attr-defined]

    def compute_loss_context_manager(self) -> contextlib.AbstractContextManager:
        """The context the forward pass runs in: mixed-precision autocast when bf16/fp16 is on."""
        return self.autocast_smart_context_manager()

    def autocast_smart_context_manager(
        self, cache_enabled: bool | None = True
    ) -> contextlib.AbstractContextManager:
        return self.strategy.autocast()

    # ---- counting -----------------------------------------------------------------------------------------------
    def num_examples(self, dataloader: DataLoader) -> int:
        """Samples in the loader's dataset (batches x batch size for a dataset without a length)."""
        if has_length(dataloader.dataset):
            return len(dataloader.dataset)
        return len(dataloader) * (dataloader.batch_size or 1)

    def floating_point_ops(self, inputs: dict[str, Any]) -> int:
        """The model's own `floating_point_ops(inputs)` (transformers models have it), else 0."""
        model = self.strategy.unwrap(self.model)
        if hasattr(model, "floating_point_ops"):
            return int(model.floating_point_ops(inputs))
        return 0

    def store_flos(self) -> None:
        """Add the flos user code counted in `current_flos` to `state.total_flos` (the loop counts its own)."""
        self.state.total_flos += self.current_flos
        self.current_flos = 0.0

    # ---- evaluation ---------------------------------------------------------------------------------------------
    def evaluation_loop(
        self,
        dataloader: DataLoader,
        description: str = "Evaluation",
        prediction_loss_only: bool | None = None,
        ignore_keys: list[str] | None = None,
        metric_key_prefix: str = "eval",
    ) -> EvalLoopOutput:
        """Predictions, labels and `<prefix>_*` metrics over `dataloader` (evaluate and predict go through here,
        so a subclass that overrides it changes both)."""
        loss_only = self.args.prediction_loss_only if prediction_loss_only is None else prediction_loss_only
        if not getattr(self, "is_in_train", False) and (self.args.bf16_full_eval or self.args.fp16_full_eval):
            # transformers casts the model itself (not autocast) for a standalone evaluation, and leaves it cast
            dtype = torch.bfloat16 if self.args.bf16_full_eval else torch.float16
            self.model = self.model.to(dtype=dtype)
        # as in transformers (which places the model at construction), a direct call finds it on the device
        self._place_model()  # type: ignore[attr-defined]
        # as in transformers, every later event's kwargs carry the last evaluation loader
        self.callback_handler.eval_dataloader = dataloader  # type: ignore[attr-defined]
        return run_evaluation_loop(self, dataloader, metric_key_prefix, loss_only, ignore_keys)  # type: ignore[arg-type]
