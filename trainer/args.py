"""`TrainingArguments`: every knob of a run, with Hugging Face names, checked when the object is built.

A bad value raises `TrainerConfigError` naming the field and the fix, so a typo in a YAML file fails before any model
is built. The object round-trips through dict, JSON and YAML; `dataclasses.replace` re-validates.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import math
import os
import types
import typing
from dataclasses import dataclass
from enum import Enum
from typing import Any, Union

from trainer.accelerate_launch import apply_accelerate_launch
from trainer.args_runtime import LOG_LEVELS, ProcessProperties
from trainer.args_unsupported import check_unsupported
from trainer.deepspeed_config import fill_deepspeed_config
from trainer.errors import TrainerConfigError
from trainer.fsdp_options import validate_fsdp_config
from trainer.report_to import normalise_report_to


class IntervalStrategy(str, Enum):
    """When to log or evaluate: never, every N optimizer steps, or at the end of each epoch."""

    NO = "no"
    STEPS = "steps"
    EPOCH = "epoch"


class SaveStrategy(str, Enum):
    """When to save a checkpoint; `best` saves whenever an evaluation improves the best metric."""

    NO = "no"
    STEPS = "steps"
    EPOCH = "epoch"
    BEST = "best"


OPTIMIZERS = ("adamw_torch", "adamw_torch_fused", "sgd", "adafactor", "adagrad")
SCHEDULERS = (
    "linear",
    "cosine",
    "cosine_with_restarts",
    "polynomial",
    "constant",
    "constant_with_warmup",
    "inverse_sqrt",
    "reduce_on_plateau",
    "cosine_with_min_lr",
    "cosine_warmup_with_min_lr",
)
STRATEGIES = ("auto", "single", "ddp", "fsdp", "deepspeed")

# Every field acts: the Trainer reads it, or one of these says how it acts, or trainer/args_unsupported.py refuses it
# (tests/trainer/test_every_argument_acts.py walks the fields).
# field -> the derived value the Trainer reads instead (set or computed here)
DERIVED_FIELDS = {
    "greater_is_better": "higher_is_better",
    "data_seed": "sampler_seed",
    "activation_checkpointing": "gradient_checkpointing",
    "activation_checkpointing_kwargs": "gradient_checkpointing_kwargs",
}
# read by a script, not by the Trainer, as in transformers (`if training_args.do_train: ...`)
SCRIPT_FIELDS = ("do_train", "do_eval", "do_predict", "resume_from_checkpoint")


@dataclass
class TrainingArguments(ProcessProperties):
    """The arguments of one training run. Names and defaults follow `transformers.TrainingArguments`."""

    output_dir: str | None = "trainer_output"  # None: "trainer_output"; "~" expanded (as transformers)
    # ---- length of the run
    num_train_epochs: float = 3.0
    max_steps: int = -1
    per_device_train_batch_size: int = 8
    per_device_eval_batch_size: int = 8
    gradient_accumulation_steps: int = 1
    auto_find_batch_size: bool = False
    # ---- optimizer and schedule
    optim: str = "adamw_torch"
    optim_args: dict | None = None
    learning_rate: float = 5e-5
    weight_decay: float = 0.0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_epsilon: float = 1e-8
    max_grad_norm: float = 1.0
    label_smoothing_factor: float = 0.0  # > 0: compute_loss smooths the labels (transformers' LabelSmoother)
    lr_scheduler_type: str = "linear"
    lr_scheduler_kwargs: dict | None = None
    warmup_steps: float = 0  # steps, or a fraction of the training steps when < 1 (transformers 5)
    warmup_ratio: float = 0.0
    # ---- logging, evaluation, saving (steps: an int, or a fraction of max_steps when < 1)
    logging_strategy: IntervalStrategy = IntervalStrategy.STEPS
    logging_steps: float = 500
    logging_first_step: bool = False
    logging_nan_inf_filter: bool = True
    max_non_finite_steps: int = 10
    eval_strategy: IntervalStrategy = IntervalStrategy.NO
    eval_steps: float | None = None
    eval_on_start: bool = False
    eval_accumulation_steps: int | None = None  # move predictions to the CPU every N eval batches
    batch_eval_metrics: bool = (
        False  # compute_metrics(pred, compute_result) per batch, result at the last one
    )
    include_for_metrics: list[str] = dataclasses.field(
        default_factory=list
    )  # "inputs", "loss" in EvalPrediction
    eval_delay: float = 0  # steps (eval_strategy steps) or epochs (epoch) to wait before the first evaluation
    prediction_loss_only: bool = False
    save_strategy: SaveStrategy = SaveStrategy.STEPS
    save_steps: float = 500
    save_total_limit: int | None = None
    save_only_model: bool = False
    save_on_each_node: bool = False  # multi-node with per-node disks: local rank 0 of every node writes
    load_best_model_at_end: bool = False
    metric_for_best_model: str | None = None
    greater_is_better: bool | None = None
    ignore_data_skip: bool = False
    # True: on resume, re-create stateful callbacks (and the control) from the checkpoint, as transformers does
    restore_callback_states_from_checkpoint: bool = False
    # ---- reproducibility
    seed: int = 42
    data_seed: int | None = None
    full_determinism: bool = False
    # ---- precision and speed
    bf16: bool = False
    fp16: bool = False
    bf16_full_eval: bool = False  # evaluate with the model cast to bf16 (not autocast)
    fp16_full_eval: bool = False
    tf32: bool | None = None  # TF32 matmuls on Ampere+ GPUs; None leaves torch's setting
    use_cpu: bool = False
    gradient_checkpointing: bool = False
    gradient_checkpointing_kwargs: dict | None = None  # passed to model.gradient_checkpointing_enable
    activation_checkpointing: bool | None = None  # transformers 5's name for gradient_checkpointing
    activation_checkpointing_kwargs: dict | None = None
    torch_compile: bool = False
    torch_compile_backend: str | None = None  # setting either turns torch_compile on, as in transformers
    torch_compile_mode: str | None = None
    torch_empty_cache_steps: int | None = None  # empty the accelerator's cache every N steps
    neftune_noise_alpha: float | None = None  # NEFTune: noise on the input embeddings while training
    include_num_input_tokens_seen: bool | str = "no"  # "no", "all", "non_padding" (True = "all")
    # ---- data loading
    dataloader_num_workers: int = 0
    dataloader_pin_memory: bool = True
    dataloader_drop_last: bool = False
    dataloader_persistent_workers: bool = False
    dataloader_prefetch_factor: int | None = None
    dataloader_multiprocessing_context: str | None = None
    remove_unused_columns: bool = True  # a datasets.Dataset loses the columns model.forward does not take
    label_names: list[str] | None = None
    # ---- reporting
    report_to: list[str] | str | None = (
        "none"  # tensorboard, wandb, mlflow, "all" or "none" (trainer/report_to.py)
    )
    run_name: str | None = None
    disable_tqdm: bool = False
    skip_memory_metrics: bool = True  # False: memory figures of each phase (trainer/memory.py)
    log_level: str = "passive"  # the trainer's logger level on the main process: debug, info, ..., passive
    log_level_replica: str = "warning"  # on the other processes
    log_on_each_node: bool = True
    # ---- parallelism (see trainer/strategies/)
    strategy: str = "auto"
    fsdp_config: dict | None = None
    deepspeed: str | dict | None = None
    ddp_find_unused_parameters: bool | None = None
    ddp_bucket_cap_mb: int | None = None
    ddp_timeout: int = 1800
    ddp_broadcast_buffers: bool | None = None
    ddp_static_graph: bool | None = None
    ddp_backend: str | None = None  # nccl, gloo, ... (the strategy's default when None)
    local_rank: int = -1  # set by launchers; the LOCAL_RANK of the environment wins, as in transformers
    # ---- transformers fields that cannot apply here: accepted at their default, refused when set (see
    # trainer/args_unsupported.py for each reason)
    optim_target_modules: None | str | list[str] = None
    average_tokens_across_devices: bool = True
    use_liger_kernel: bool = False
    liger_kernel_config: dict | None = None
    use_cache: bool = False
    project: str = "huggingface"
    trackio_space_id: str | None = None
    trackio_bucket_id: str | None = None
    trackio_static_space_id: str | None = None
    eval_do_concat_batches: bool = True
    eval_use_gather_object: bool = False
    enable_jit_checkpoint: bool = False
    push_to_hub: bool = False
    hub_token: str | None = None
    hub_private_repo: bool | None = None
    hub_model_id: str | None = None
    hub_strategy: str = "every_save"
    hub_always_push: bool = False
    hub_revision: str | None = None
    accelerator_config: dict | str | None = None
    parallelism_config: Any = None
    dataloader_in_order: bool = True
    train_sampling_strategy: str = "random"
    length_column_name: str = "length"
    fsdp: str | None = None
    debug: str = ""
    # ---- read by example scripts, not by the Trainer (as in transformers)
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    resume_from_checkpoint: str | None = None

    def __post_init__(self) -> None:
        check_unsupported(self)
        _parse_json_dicts(self)
        _check_types(self)
        _normalise(self)
        apply_accelerate_launch(self)  # before the checks: the launcher's settings are checked like the rest
        _normalise_transformers_fields(self)
        _check_values(self)
        _check_transformers_fields(self)
        _check_best_model(self)
        _check_parallelism(self)

    # ---- derived values --------------------------------------------------------------------------------------
    @property
    def train_batch_size(self) -> int:
        return self.per_device_train_batch_size

    @property
    def eval_batch_size(self) -> int:
        return self.per_device_eval_batch_size

    @property
    def eval_interval(self) -> float:
        """eval_steps, or logging_steps when eval_steps is unset (kept unset so `dataclasses.replace` follows)."""
        return self.logging_steps if self.eval_steps is None else self.eval_steps

    @property
    def best_metric_name(self) -> str | None:
        """metric_for_best_model with the `eval_` prefix; `eval_loss` when only load_best_model_at_end is set."""
        name = self.metric_for_best_model
        if name is None and self.load_best_model_at_end:
            name = "loss"
        if name is None:
            return None
        return name if name.startswith("eval_") else f"eval_{name}"

    @property
    def higher_is_better(self) -> bool:
        """greater_is_better, defaulting to False for metrics whose name ends in 'loss'."""
        if self.greater_is_better is not None:
            return self.greater_is_better
        return not (self.best_metric_name or "loss").endswith("loss")

    @property
    def sampler_seed(self) -> int:
        return self.seed if self.data_seed is None else self.data_seed

    def get_warmup_steps(self, num_training_steps: int) -> int:
        """warmup_steps (a fraction of `num_training_steps` when below 1, as in transformers 5) wins over
        warmup_ratio."""
        if self.warmup_steps >= 1:
            return int(self.warmup_steps)
        return math.ceil(num_training_steps * (self.warmup_steps or self.warmup_ratio))

    # ---- serialisation ---------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def to_json(self, indent: int = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)

    def to_json_string(self) -> str:
        """transformers' name for to_json."""
        return self.to_json()

    def to_yaml(self) -> str:
        import yaml

        return yaml.safe_dump(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainingArguments:
        if not isinstance(values, dict):
            raise TrainerConfigError(
                f"TrainingArguments.from_dict expects a mapping, got {type(values).__name__}"
            )
        names = [f.name for f in dataclasses.fields(cls)]
        for key in values:
            if key not in names:
                close = difflib.get_close_matches(str(key), names, n=1)
                hint = f" Did you mean '{close[0]}'?" if close else ""
                raise TrainerConfigError(f"unknown training argument '{key}'.{hint}")
        return cls(**values)

    @classmethod
    def from_json(cls, text: str) -> TrainingArguments:
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_yaml(cls, text: str) -> TrainingArguments:
        import yaml

        return cls.from_dict(yaml.safe_load(text) or {})


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


# ---- validation -------------------------------------------------------------------------------------------------
def _allowed_types(annotation: Any) -> tuple[type, ...]:
    """The runtime types a field accepts, from its annotation (`int | None` -> (int, NoneType))."""
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        return tuple(t for arg in typing.get_args(annotation) for t in _allowed_types(arg))
    if annotation is type(None):
        return (type(None),)
    if origin is not None:
        return (origin,)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return (str,)
    if annotation is Any:
        return (object,)
    return (annotation,)


def _type_ok(value: Any, allowed: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in allowed
    if isinstance(value, int) and float in allowed:
        return True
    return isinstance(value, allowed)


@functools.cache
def field_types(cls: type) -> dict[str, Any]:
    """Each field's allowed types, worked out once per class (resolving the annotations takes milliseconds, and every
    trial builds its arguments); a subclass (extra fields) gets its own."""
    hints = typing.get_type_hints(cls)
    return {f.name: _allowed_types(hints[f.name]) for f in dataclasses.fields(cls)}


# Fields that take a dict, also as a JSON string: what a script's command line passes (transformers'
# _VALID_DICT_FIELDS that we share; accelerator_config is refused before this).
JSON_DICT_FIELDS = (
    "lr_scheduler_kwargs",
    "gradient_checkpointing_kwargs",
    "activation_checkpointing_kwargs",
    "fsdp_config",
    "deepspeed",
)


def _parse_json_dicts(args: TrainingArguments) -> None:
    """'{"factor": 0.5}' -> {"factor": 0.5}. Only strings that start with '{': another string is a file path
    (deepspeed). String values inside are read as transformers reads them ("true" -> True, "3" -> 3)."""
    for name in JSON_DICT_FIELDS:
        value = getattr(args, name)
        if not (isinstance(value, str) and value.startswith("{")):
            continue
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as error:
            raise TrainerConfigError(f"training argument '{name}' is not valid JSON: {error}") from error
        setattr(args, name, _typed_strings(parsed))


def _typed_strings(values: dict[str, Any]) -> dict[str, Any]:
    """transformers' _convert_str_dict: booleans and numbers written as strings become booleans and numbers."""
    for key, value in values.items():
        if isinstance(value, dict):
            values[key] = _typed_strings(value)
        elif isinstance(value, str) and value.lower() in ("true", "false"):
            values[key] = value.lower() == "true"
        elif isinstance(value, str) and value.isdigit():
            values[key] = int(value)
        elif isinstance(value, str) and value.replace(".", "", 1).isdigit():
            values[key] = float(value)
    return values


# A config file's words for Python's types ("must be a number", not "must be float").
TYPE_WORDS: dict[type, str] = {
    int: "a whole number",
    float: "a number",
    bool: "true or false",
    str: "a string",
    type(None): "null",
}


def _check_types(args: TrainingArguments) -> None:
    for name, allowed in field_types(type(args)).items():
        value = getattr(args, name)
        if not _type_ok(value, allowed):
            names = " or ".join(TYPE_WORDS.get(t, t.__name__) for t in allowed)
            raise TrainerConfigError(f"training argument '{name}' must be {names} (got {value!r})")


def _choice(name: str, value: Any, enum_or_choices: Any) -> Any:
    choices = (
        [e.value for e in enum_or_choices] if isinstance(enum_or_choices, type) else list(enum_or_choices)
    )
    if _plain(value) not in choices:
        close = difflib.get_close_matches(str(_plain(value)), choices, n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        raise TrainerConfigError(
            f"training argument '{name}' is {_plain(value)!r}; choose one of {choices}.{hint}"
        )
    return enum_or_choices(_plain(value)) if isinstance(enum_or_choices, type) else value


# transformers' names for our schedules
SCHEDULER_ALIASES = {"reduce_lr_on_plateau": "reduce_on_plateau"}


def _normalise(args: TrainingArguments) -> None:
    args.lr_scheduler_type = SCHEDULER_ALIASES.get(args.lr_scheduler_type, args.lr_scheduler_type)
    args.logging_strategy = _choice("logging_strategy", args.logging_strategy, IntervalStrategy)
    args.eval_strategy = _choice("eval_strategy", args.eval_strategy, IntervalStrategy)
    args.save_strategy = _choice("save_strategy", args.save_strategy, SaveStrategy)
    _choice("optim", args.optim, OPTIMIZERS)
    _choice("lr_scheduler_type", args.lr_scheduler_type, SCHEDULERS)
    _choice("strategy", args.strategy, STRATEGIES)
    args.report_to = normalise_report_to(
        args.report_to
    )  # "all" -> the installed integrations, as transformers
    args.output_dir = os.path.expanduser("trainer_output" if args.output_dir is None else args.output_dir)


def _normalise_transformers_fields(args: TrainingArguments) -> None:
    """The derived values transformers' __post_init__ sets, for the fields it shares with us."""
    if args.activation_checkpointing is not None:  # transformers 5's name wins over the deprecated one
        args.gradient_checkpointing = args.activation_checkpointing
    if args.activation_checkpointing_kwargs is not None:
        args.gradient_checkpointing_kwargs = args.activation_checkpointing_kwargs
    if args.use_cpu:
        args.dataloader_pin_memory = False  # nothing to pin for: the batches stay in CPU memory
    if isinstance(args.include_num_input_tokens_seen, bool):
        args.include_num_input_tokens_seen = "all" if args.include_num_input_tokens_seen else "no"
    if args.torch_compile_backend is not None or args.torch_compile_mode is not None:
        args.torch_compile = True
    if args.eval_strategy == IntervalStrategy.STEPS and not args.eval_steps:
        args.eval_steps = args.logging_steps  # transformers: evaluate as often as it logs
    if args.do_eval is False and args.eval_strategy != IntervalStrategy.NO:
        args.do_eval = True
    # transformers resolves these here, and ported callbacks read args.greater_is_better directly
    if args.metric_for_best_model is None and (
        args.load_best_model_at_end or args.lr_scheduler_type == "reduce_on_plateau"
    ):
        args.metric_for_best_model = "loss"
    if args.greater_is_better is None and args.metric_for_best_model is not None:
        args.greater_is_better = not args.metric_for_best_model.endswith("loss")
    local_rank = os.environ.get("LOCAL_RANK")
    if local_rank not in (None, ""):
        args.local_rank = int(
            local_rank
        )  # the launcher's word wins, as transformers reads it through accelerate


def _check_transformers_fields(args: TrainingArguments) -> None:
    _choice("include_num_input_tokens_seen", args.include_num_input_tokens_seen, ("no", "all", "non_padding"))
    _choice("log_level", args.log_level, tuple(LOG_LEVELS))
    _choice("log_level_replica", args.log_level_replica, tuple(LOG_LEVELS))
    if not 0.0 <= args.label_smoothing_factor < 1.0:
        raise TrainerConfigError(
            f"training argument 'label_smoothing_factor' must be in [0, 1), got {args.label_smoothing_factor}"
        )
    for name in ("eval_accumulation_steps", "torch_empty_cache_steps", "dataloader_prefetch_factor"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise TrainerConfigError(
                f"training argument '{name}' must be >= 1 (or null), got {getattr(args, name)}"
            )
    if args.neftune_noise_alpha is not None and args.neftune_noise_alpha <= 0:
        raise TrainerConfigError(
            f"training argument 'neftune_noise_alpha' must be > 0 (or null for no noise), got {args.neftune_noise_alpha}"
        )
    unknown = [name for name in args.include_for_metrics if name not in ("inputs", "loss")]
    if unknown:
        raise TrainerConfigError(
            f"training argument 'include_for_metrics' may hold 'inputs' and 'loss', got {unknown}"
        )
    if args.bf16_full_eval and args.fp16_full_eval:
        raise TrainerConfigError("'bf16_full_eval' and 'fp16_full_eval' are both true; choose one")
    if args.eval_delay < 0:
        raise TrainerConfigError(f"training argument 'eval_delay' must be >= 0, got {args.eval_delay}")
    worker_only = [
        n
        for n in ("dataloader_persistent_workers", "dataloader_prefetch_factor")
        if getattr(args, n) not in (False, None)
    ]
    if worker_only and args.dataloader_num_workers == 0:
        raise TrainerConfigError(
            f"{worker_only} need worker processes: set 'dataloader_num_workers' > 0, or remove them"
        )


def _positive(args: TrainingArguments, name: str, allow_zero: bool = False) -> None:
    value = getattr(args, name)
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise TrainerConfigError(f"training argument '{name}' must be {bound}, got {value}")


def _check_steps(args: TrainingArguments, name: str, strategy: Enum) -> None:
    value = getattr(args, name)
    if _plain(strategy) != "steps":
        return
    if value <= 0:
        raise TrainerConfigError(
            f"training argument '{name}' must be > 0 when its strategy is 'steps', got {value}"
        )
    if value > 1 and value != int(value):
        raise TrainerConfigError(
            f"training argument '{name}' must be a whole number of steps, or a fraction of max_steps below 1; got {value}"
        )


def _check_values(args: TrainingArguments) -> None:
    for name in ("per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps"):
        _positive(args, name)
    for name in ("learning_rate", "weight_decay", "adam_epsilon", "max_grad_norm", "warmup_steps"):
        _positive(args, name, allow_zero=True)
    for name in ("max_non_finite_steps", "ddp_timeout"):
        _positive(args, name)
    _positive(args, "dataloader_num_workers", allow_zero=True)
    for name in ("adam_beta1", "adam_beta2"):
        if not 0.0 <= getattr(args, name) < 1.0:
            raise TrainerConfigError(
                f"training argument '{name}' must be in [0, 1), got {getattr(args, name)}"
            )
    if not 0.0 <= args.warmup_ratio <= 1.0:
        raise TrainerConfigError(
            f"training argument 'warmup_ratio' must be in [0, 1], got {args.warmup_ratio}"
        )
    if args.max_steps <= 0 and args.num_train_epochs <= 0:
        raise TrainerConfigError(
            "set 'num_train_epochs' > 0 or 'max_steps' > 0: with neither, the run would train for zero steps"
        )
    if args.save_total_limit is not None and args.save_total_limit < 1:
        raise TrainerConfigError(
            f"training argument 'save_total_limit' must be >= 1 (or null to keep every checkpoint), got {args.save_total_limit}"
        )
    _check_steps(args, "logging_steps", args.logging_strategy)
    if args.eval_steps is not None:
        _check_steps(args, "eval_steps", args.eval_strategy)
    _check_steps(args, "save_steps", args.save_strategy)
    if args.bf16 and args.fp16:
        raise TrainerConfigError("'bf16' and 'fp16' are both true; choose one mixed-precision mode")
    if args.lr_scheduler_type == "reduce_on_plateau" and args.eval_strategy == IntervalStrategy.NO:
        raise TrainerConfigError(
            "lr_scheduler_type 'reduce_on_plateau' needs evaluations: set 'eval_strategy' to 'steps' or 'epoch'"
        )
    if args.eval_on_start and args.eval_strategy == IntervalStrategy.NO:
        raise TrainerConfigError(
            "'eval_on_start' needs evaluations: set 'eval_strategy' to 'steps' or 'epoch'"
        )


def _check_best_model(args: TrainingArguments) -> None:
    if args.save_strategy == SaveStrategy.BEST and args.best_metric_name is None:
        raise TrainerConfigError(
            "save_strategy 'best' needs 'metric_for_best_model' (for example 'eval_loss' or 'eval_accuracy')"
        )
    if args.save_strategy == SaveStrategy.BEST and args.eval_strategy == IntervalStrategy.NO:
        raise TrainerConfigError(
            "save_strategy 'best' needs evaluations: set 'eval_strategy' to 'steps' or 'epoch'"
        )
    if not args.load_best_model_at_end:
        return
    if args.eval_strategy == IntervalStrategy.NO:
        raise TrainerConfigError(
            "'load_best_model_at_end' needs evaluations: set 'eval_strategy' to 'steps' or 'epoch'"
        )
    if args.save_strategy == SaveStrategy.BEST:
        return
    if args.save_strategy.value != args.eval_strategy.value:
        raise TrainerConfigError(
            f"'load_best_model_at_end' needs save_strategy ({args.save_strategy.value}) to match eval_strategy "
            f"({args.eval_strategy.value}), or save_strategy 'best'"
        )
    eval_steps = args.eval_interval
    if args.eval_strategy == IntervalStrategy.STEPS and eval_steps >= 1 and args.save_steps >= 1:
        if args.save_steps % eval_steps != 0:
            raise TrainerConfigError(
                f"'load_best_model_at_end' needs save_steps ({args.save_steps}) to be a multiple of eval_steps "
                f"({eval_steps}), so that every saved checkpoint has been evaluated"
            )


# ---- parallelism (owner: strategies; see trainer/strategies/) ----------------------------------------------------
def _check_parallelism(args: TrainingArguments) -> None:
    """Refuse settings that contradict the chosen strategy, and check DeepSpeed/FSDP configs before any rank starts."""
    if args.deepspeed is not None and args.strategy not in ("auto", "deepspeed"):
        raise TrainerConfigError(
            f"'deepspeed' is set but strategy is '{args.strategy}'; set strategy to 'deepspeed' (or 'auto'), or remove "
            "'deepspeed'"
        )
    if args.fsdp_config is not None and args.strategy not in ("auto", "fsdp"):
        raise TrainerConfigError(
            f"'fsdp_config' is set but strategy is '{args.strategy}'; set strategy to 'fsdp' (or 'auto'), or remove "
            "'fsdp_config'"
        )
    if args.deepspeed is not None and args.fsdp_config is not None:
        raise TrainerConfigError("'deepspeed' and 'fsdp_config' are both set; choose one sharding strategy")
    ddp_only = [
        n
        for n in (
            "ddp_find_unused_parameters",
            "ddp_bucket_cap_mb",
            "ddp_broadcast_buffers",
            "ddp_static_graph",
        )
        if getattr(args, n) is not None
    ]
    if ddp_only and args.strategy in ("single", "fsdp", "deepspeed"):
        raise TrainerConfigError(
            f"{ddp_only} apply to strategy 'ddp' only; remove them or set strategy to 'ddp'"
        )
    if args.ddp_bucket_cap_mb is not None and args.ddp_bucket_cap_mb <= 0:
        raise TrainerConfigError(
            f"training argument 'ddp_bucket_cap_mb' must be > 0, got {args.ddp_bucket_cap_mb}"
        )
    if args.fsdp_config is not None:
        _as_config_error(validate_fsdp_config, args.fsdp_config)
    if args.deepspeed is not None:
        # No world size yet: train_batch_size (micro x accumulation x ranks) is checked when the ranks start.
        _as_config_error(fill_deepspeed_config, args.deepspeed, args, None)


def _as_config_error(check: Any, *values: Any) -> None:
    try:
        check(*values)
    except ValueError as error:
        raise TrainerConfigError(str(error)) from error
