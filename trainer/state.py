"""`TrainerState` (what a run has done so far, saved in every checkpoint) and `TrainerControl` (what to do next)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


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
    # Our addition: the absolute peaks of the last train() in bytes (trainer.memory.RunPeaks: cpu_rss, gpu_allocated,
    # gpu_reserved), recorded whatever skip_memory_metrics says. Not restored on resume: it describes this process.
    peak_memory: dict[str, int | None] = field(default_factory=dict)

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

    def save_to_json(self, json_path: str | Path) -> None:
        text = json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n"
        Path(json_path).write_text(text, encoding="utf-8")

    @classmethod
    def load_from_json(cls, json_path: str | Path) -> TrainerState:
        values = json.loads(Path(json_path).read_text(encoding="utf-8"))
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})


@dataclass
class TrainerControl:
    """Flags that callbacks set to steer the loop. The loop resets the per-step flags after acting on them."""

    should_training_stop: bool = False
    should_epoch_stop: bool = False
    should_save: bool = False
    should_evaluate: bool = False
    should_log: bool = False

    def _new_training(self) -> None:
        self.should_training_stop = False

    def _new_epoch(self) -> None:
        self.should_epoch_stop = False

    def _new_step(self) -> None:
        self.should_save = False
        self.should_evaluate = False
        self.should_log = False
