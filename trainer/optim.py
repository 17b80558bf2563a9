"""Optimizers and learning-rate schedules named by `args.optim` and `args.lr_scheduler_type` (transformers' formulas)."""

from __future__ import annotations

import functools
import math
import re
from typing import Any

import torch
from torch.optim.lr_scheduler import LambdaLR, ReduceLROnPlateau

from trainer.args import TrainingArguments
from trainer.errors import TrainerConfigError

# ---- optimizers -------------------------------------------------------------------------------------------------
# transformers 5.23's rule (Trainer.get_decay_parameter_names): no decay for any parameter of a LayerNorm
# (ALL_LAYERNORM_LAYERS) nor for any whose lower-cased dotted name matches one of these patterns (biases, norms).
NO_DECAY_LAYERS: tuple[type[torch.nn.Module], ...] = (torch.nn.LayerNorm,)
NO_DECAY_NAME_PATTERNS = tuple(
    re.compile(pattern)
    for pattern in (r"bias", r"layernorm", r"rmsnorm", r"(?:^|\.)norm(?:$|\.)", r"_norm(?:$|\.)")
)


def _decay_excluded(name: str) -> bool:
    return any(pattern.search(name.lower()) for pattern in NO_DECAY_NAME_PATTERNS)


def decay_parameter_names(model: torch.nn.Module) -> list[str]:
    """The names of the parameters weight decay applies to, as transformers' `get_parameter_names(model,
    [nn.LayerNorm], patterns)` lists them: every parameter but those of LayerNorm modules and those named like a
    bias or a norm. Walked child by child as there, so that the list (order included) is the same."""
    names: list[str] = []
    for child_name, child in model.named_children():
        if isinstance(child, NO_DECAY_LAYERS):
            continue
        paths = (f"{child_name}.{name}" for name in decay_parameter_names(child))
        names += [path for path in paths if not _decay_excluded(path)]
    # the module's own parameters (transformers lists every registered key, a None one included)
    names += [key for key in model._parameters if not _decay_excluded(key)]
    return names


def parameter_groups(
    model: torch.nn.Module, weight_decay: float, decay_names: list[str] | None = None
) -> list[dict[str, Any]]:
    """The trainable parameters in transformers' two groups: `decay_names` (by default `decay_parameter_names`) with
    `weight_decay`, the rest (biases, norm weights) without. One group when there is no decay at all."""
    named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    if weight_decay == 0:
        return [{"params": [p for _, p in named], "weight_decay": 0.0}]
    decayed = set(decay_parameter_names(model) if decay_names is None else decay_names)
    decay = [p for name, p in named if name in decayed]
    no_decay = [p for name, p in named if name not in decayed]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def _optimizer_class_and_kwargs(args: TrainingArguments) -> tuple[type, dict[str, Any]]:
    adam = {"betas": (args.adam_beta1, args.adam_beta2), "eps": args.adam_epsilon}
    table: dict[str, tuple[type, dict[str, Any]]] = {
        "adamw_torch": (torch.optim.AdamW, {**adam, "foreach": None}),
        "adamw_torch_fused": (torch.optim.AdamW, {**adam, "fused": True}),
        "sgd": (torch.optim.SGD, {}),
        "adafactor": (torch.optim.Adafactor, {}),
        "adagrad": (torch.optim.Adagrad, {"eps": args.adam_epsilon}),
    }
    return table[args.optim]


def create_optimizer(
    args: TrainingArguments, model: torch.nn.Module, decay_names: list[str] | None = None
) -> torch.optim.Optimizer:
    """The optimizer `args.optim` over the model's trainable parameters; `args.optim_args` adds keyword arguments.
    `decay_names`: the parameters weight decay applies to (the Trainer passes its `get_decay_parameter_names`)."""
    cls, kwargs = _optimizer_class_and_kwargs(args)
    kwargs.update(args.optim_args or {})
    groups = parameter_groups(model, args.weight_decay, decay_names)
    try:
        return cls(groups, lr=args.learning_rate, **kwargs)
    except (TypeError, ValueError, RuntimeError) as error:
        raise TrainerConfigError(
            f"cannot build optimizer '{args.optim}' with optim_args {args.optim_args}: {error}"
        ) from error


# ---- learning-rate schedules (multipliers of the initial learning rate) -----------------------------------------
def _warmup(step: int, num_warmup_steps: int) -> float:
    return step / max(1, num_warmup_steps)


def _linear(step: int, *, num_warmup_steps: int, num_training_steps: int) -> float:
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    return max(0.0, (num_training_steps - step) / max(1, num_training_steps - num_warmup_steps))


def _cosine(step: int, *, num_warmup_steps: int, num_training_steps: int, num_cycles: float = 0.5) -> float:
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    progress = (step - num_warmup_steps) / max(1, num_training_steps - num_warmup_steps)
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * num_cycles * 2.0 * progress)))


def _cosine_with_restarts(
    step: int, *, num_warmup_steps: int, num_training_steps: int, num_cycles: int = 1
) -> float:
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    progress = (step - num_warmup_steps) / max(1, num_training_steps - num_warmup_steps)
    if progress >= 1.0:
        return 0.0
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * ((num_cycles * progress) % 1.0))))


def _polynomial(
    step: int,
    *,
    num_warmup_steps: int,
    num_training_steps: int,
    lr_init: float,
    lr_end: float = 1e-7,
    power: float = 1.0,
) -> float:
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    if step > num_training_steps:
        return lr_end / lr_init
    remaining = 1 - (step - num_warmup_steps) / max(1, num_training_steps - num_warmup_steps)
    return ((lr_init - lr_end) * remaining**power + lr_end) / lr_init


def _constant(step: int, *, num_warmup_steps: int, num_training_steps: int) -> float:
    return 1.0


def _constant_with_warmup(step: int, *, num_warmup_steps: int, num_training_steps: int) -> float:
    return _warmup(step, num_warmup_steps) if step < num_warmup_steps else 1.0


def _inverse_sqrt(
    step: int, *, num_warmup_steps: int, num_training_steps: int, timescale: int | None = None
) -> float:
    timescale = timescale or num_warmup_steps or 10_000
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    return 1.0 / math.sqrt((step + timescale - num_warmup_steps) / timescale)


def _min_lr_rate(lr_init: float, min_lr: float | None, min_lr_rate: float | None) -> float:
    if min_lr is not None and min_lr_rate is not None:
        raise TypeError("set min_lr or min_lr_rate in lr_scheduler_kwargs, not both")
    if min_lr is None and min_lr_rate is None:
        raise TypeError("this schedule needs min_lr or min_lr_rate in lr_scheduler_kwargs")
    return min_lr / lr_init if min_lr is not None else float(min_lr_rate)


def _cosine_with_min_lr(
    step: int,
    *,
    num_warmup_steps: int,
    num_training_steps: int,
    lr_init: float,
    num_cycles: float = 0.5,
    min_lr: float | None = None,
    min_lr_rate: float | None = None,
) -> float:
    """Cosine from the learning rate down to min_lr (or min_lr_rate x it), transformers' formula."""
    rate = _min_lr_rate(lr_init, min_lr, min_lr_rate)
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    progress = (step - num_warmup_steps) / max(1, num_training_steps - num_warmup_steps)
    factor = 0.5 * (1.0 + math.cos(math.pi * float(num_cycles) * 2.0 * progress))
    return max(0, factor * (1 - rate) + rate)


def _cosine_warmup_with_min_lr(
    step: int,
    *,
    num_warmup_steps: int,
    num_training_steps: int,
    lr_init: float,
    num_cycles: float = 0.5,
    min_lr: float | None = None,
    min_lr_rate: float | None = None,
    warmup_lr_rate: float | None = None,
) -> float:
    """transformers' cosine_warmup_with_min_lr: the warmup's first step is already above 0, the cosine ends on
    min_lr at the last step."""
    rate = _min_lr_rate(lr_init, min_lr, min_lr_rate)
    if step < num_warmup_steps:
        if warmup_lr_rate is None:
            return (step + 1.0) / max(1.0, float(num_warmup_steps))
        return warmup_lr_rate + (1.0 - warmup_lr_rate) * step / max(1, num_warmup_steps - 1)
    progress = (step - num_warmup_steps + 1.0) / max(1.0, float(num_training_steps - num_warmup_steps))
    factor = 0.5 * (1.0 + math.cos(math.pi * num_cycles * 2.0 * progress))
    return max(0, factor * (1 - rate) + rate)


SCHEDULES = {
    "cosine_with_min_lr": _cosine_with_min_lr,
    "cosine_warmup_with_min_lr": _cosine_warmup_with_min_lr,
    "linear": _linear,
    "cosine": _cosine,
    "cosine_with_restarts": _cosine_with_restarts,
    "polynomial": _polynomial,
    "constant": _constant,
    "constant_with_warmup": _constant_with_warmup,
    "inverse_sqrt": _inverse_sqrt,
}


def create_scheduler(
    args: TrainingArguments, optimizer: torch.optim.Optimizer, num_training_steps: int
) -> Any:
    """A LambdaLR for the step schedules, or ReduceLROnPlateau (stepped with the best-model metric after evaluations)."""
    kwargs = dict(args.lr_scheduler_kwargs or {})
    try:
        if args.lr_scheduler_type == "reduce_on_plateau":
            kwargs.setdefault("mode", "max" if args.higher_is_better else "min")
            return ReduceLROnPlateau(optimizer, **kwargs)
        schedule = SCHEDULES[args.lr_scheduler_type]
        if args.lr_scheduler_type in ("polynomial", "cosine_with_min_lr", "cosine_warmup_with_min_lr"):
            kwargs["lr_init"] = args.learning_rate
        warmup = args.get_warmup_steps(num_training_steps)
        # transformers' keyword names: code that inspects the schedule (lr_lambdas[0].keywords) reads the same
        multiplier = functools.partial(
            schedule, num_warmup_steps=warmup, num_training_steps=num_training_steps, **kwargs
        )
        multiplier(0)  # fail here, naming the field, if lr_scheduler_kwargs holds an unknown key
        return LambdaLR(optimizer, multiplier)
    except TypeError as error:
        raise TrainerConfigError(
            f"lr_scheduler_kwargs {args.lr_scheduler_kwargs} do not fit lr_scheduler_type "
            f"'{args.lr_scheduler_type}': {error}"
        ) from error


def rebased_multiplier(multiplier: Any, lr: float) -> Any:
    """The multiplier of a schedule whose peak rate becomes `lr` mid-run (PBT's explore, trainer.hyperparams).

    Schedules built with `lr_init` hold an absolute rate (polynomial's lr_end, cosine_with_min_lr's min_lr) as a
    fraction of the peak; with the old peak kept, the run would end at new_lr x lr_end / old_lr. Rebuilt with the new
    peak, it ends at lr_end as configured, as a run started at `lr` does (transformers' lr_end is absolute).
    """
    if isinstance(multiplier, functools.partial) and "lr_init" in multiplier.keywords:
        return functools.partial(multiplier.func, *multiplier.args, **{**multiplier.keywords, "lr_init": lr})
    return multiplier


def steps_with_scheduler(scheduler: Any) -> bool:
    """True when the scheduler advances every optimizer step (not ReduceLROnPlateau, which follows evaluations)."""
    return scheduler is not None and not isinstance(scheduler, ReduceLROnPlateau)


def current_learning_rate(optimizer: torch.optim.Optimizer) -> float:
    lr = optimizer.param_groups[0]["lr"]
    return float(lr.item() if torch.is_tensor(lr) else lr)
