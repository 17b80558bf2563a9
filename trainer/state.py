"""`TrainerState` (what a run has done so far, saved in every checkpoint) and `TrainerControl` (what to do next)."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ExportableState:
    """A callback whose state travels in checkpoints, as transformers documents it: implement `state()` returning
    `{"args": <keyword arguments of __init__>, "attributes": <attributes to set after __init__>}`.

    Saved in `trainer_state.json` under `stateful_callbacks[<class name>]` (a list when several instances of one class
    are registered). On resume with `restore_callback_states_from_checkpoint=True` each registered instance is replaced
    by one re-created from its saved state (`from_state`), as transformers does. Without it, `load_state` sets the saved
    attributes on the registered instance (our addition, so that a resumed run continues counting: see
    docs/compat.md)."""

    def state(self) -> dict[str, Any]:
        raise NotImplementedError(
            f"{type(self).__name__} inherits ExportableState but does not implement state(), which returns "
            '{"args": {...}, "attributes": {...}}'
        )

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Any:
        """A new instance built from `state()`'s output: `cls(**args)`, then each attribute set."""
        instance = cls(**state.get("args", {}))
        for name, value in state.get("attributes", {}).items():
            setattr(instance, name, value)
        return instance

    def load_state(self, values: dict[str, Any]) -> None:
        """Set the saved attributes on this instance (its constructor arguments stay as given)."""
        for name, value in values.get("attributes", {}).items():
            setattr(self, name, value)


@dataclass
class TrainerState:
    """The progress of a run. Saved as `trainer_state.json` in each checkpoint; names follow transformers."""

    epoch: float | None = None
    global_step: int = 0
    max_steps: int = 0
    num_train_epochs: int = 0
    logging_steps: int = 500
    eval_steps: int = 500
    save_steps: int = 500
    train_batch_size: int | None = None
    num_input_tokens_seen: int = 0
    total_flos: float = 0.0
    log_history: list[dict[str, float]] = field(default_factory=list)
    best_metric: float | None = None
    best_global_step: int | None = None
    best_model_checkpoint: str | None = None
    is_local_process_zero: bool = True
    is_world_process_zero: bool = True
    is_hyper_param_search: bool = False
    trial_name: str | None = None
    trial_params: dict[str, Any] | None = None
    stateful_callbacks: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Our addition: the absolute peaks of the last train() in bytes (trainer.memory.RunPeaks: cpu_rss,
        # gpu_allocated, gpu_reserved), recorded whatever skip_memory_metrics says. An attribute, not a field: it
        # describes this process, so it is neither saved in trainer_state.json nor restored, and the state's fields
        # stay transformers' (code comparing dataclasses.asdict(state) of two runs sees no process figures).
        self.peak_memory: dict[str, int | None] = {}

    def restore_progress(self, saved: TrainerState) -> None:
        """Take over what a checkpoint's run had done (its step, history, best metric); keep this run's plan."""
        for name in (
            "global_step",
            "epoch",
            "log_history",
            "best_metric",
            "best_global_step",
            "best_model_checkpoint",
            "num_input_tokens_seen",
            "total_flos",
            "stateful_callbacks",
        ):
            setattr(self, name, getattr(saved, name))

    def compute_steps(self, args: Any, max_steps: int) -> None:
        """logging_steps, eval_steps and save_steps in steps: a value below 1 is that share of max_steps, rounded
        up (transformers' rule; eval_steps None is left as it is)."""
        for kind in ("logging", "eval", "save"):
            value = getattr(args, f"{kind}_steps")
            if value is not None:
                setattr(self, f"{kind}_steps", math.ceil(max_steps * value) if value < 1 else int(value))

    def save_to_json(self, json_path: str | Path) -> None:
        text = json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n"
        Path(json_path).write_text(text, encoding="utf-8")

    @classmethod
    def load_from_json(cls, json_path: str | Path) -> TrainerState:
        values = json.loads(Path(json_path).read_text(encoding="utf-8"))
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})


@dataclass
class TrainerControl(ExportableState):
    """Flags that callbacks set to steer the loop. The loop resets the per-step flags after acting on them. Saved
    among the stateful callbacks of each checkpoint, as in transformers."""

    should_training_stop: bool = False
    should_epoch_stop: bool = False
    should_save: bool = False
    should_evaluate: bool = False
    should_log: bool = False

    def state(self) -> dict[str, Any]:
        return {"args": dataclasses.asdict(self), "attributes": {}}

    def _new_training(self) -> None:
        self.should_training_stop = False

    def _new_epoch(self) -> None:
        self.should_epoch_stop = False

    def _new_step(self) -> None:
        self.should_save = False
        self.should_evaluate = False
        self.should_log = False
