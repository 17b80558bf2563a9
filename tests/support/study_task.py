"""A tiny, deterministic task for the study manager's tests: an MLP on a generated 3-class problem (a few ms a step).

Study files written by the tests name it as `study_task:model_init`; `write_study` copies this module next to the file,
so the study's own folder makes it importable, in the test process and in subprocesses alike.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch._dynamo  # noqa: F401 - sets TORCHINDUCTOR_CACHE_DIR at import, before the env-leak check starts
import yaml
from torch import nn

from trainer import TrainerCallback

FEATURES, CLASSES = 8, 3


class Samples(torch.utils.data.Dataset):
    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[index], "labels": self.y[index]}


class MLP(nn.Module):
    """`delay` seconds of sleep per forward make a trial slow enough to be killed mid-way; `poison` makes evaluation
    (not training) produce NaN logits, so the eval loss is not finite."""

    def __init__(self, hidden: int, dropout: float, delay: float = 0.0, poison: bool = False) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(FEATURES, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, CLASSES)
        )
        self.delay, self.poison = delay, poison

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        if self.delay:
            time.sleep(self.delay)
        logits = self.net(x)
        if self.poison and not self.training:
            logits = logits * float("nan")
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = nn.functional.cross_entropy(logits, labels)
        return out


class StopAfterEvaluations(TrainerCallback):
    """Stops training once this instance has seen `evaluations` evaluations; it never resets, so an instance shared by
    two trials would stop the second one at its first evaluation."""

    def __init__(self, evaluations: int) -> None:
        self.evaluations, self.seen = evaluations, 0

    def on_evaluate(self, args, state, control, **kwargs):
        self.seen += 1
        if self.seen >= self.evaluations:
            control.should_training_stop = True


class SlowSave(TrainerCallback):
    """Sleeps after each checkpoint is written: a run stopping on a first Ctrl-C stays in its stop long enough for a
    second Ctrl-C to land there, whatever moment of a step the first one hit."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def on_save(self, args, state, control, **kwargs):
        time.sleep(self.seconds)


class KillOnceAfterSave(TrainerCallback):
    """SIGKILLs its own process right after the checkpoint at `step` is written, once per study (the `marker` file
    says it happened): a crash at the exact moment between a pause point's save and the pause, with no timing."""

    def __init__(self, step: int, marker: str) -> None:
        self.step, self.marker = step, Path(marker)

    def on_save(self, args, state, control, **kwargs):
        if state.global_step == self.step and not self.marker.exists():
            self.marker.write_text(f"{os.getpid()} {args.output_dir}\n")
            os.kill(os.getpid(), signal.SIGKILL)


class TermDuringLastStep(TrainerCallback):
    """SIGTERMs its own process while the last training step runs, as a worker stopping it then would."""

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == state.max_steps - 1:
            os.kill(os.getpid(), signal.SIGTERM)


STEP = {"global": 0}  # the trial's current global step, kept by StepClock for compute_peaked_metrics


class StepClock(TrainerCallback):
    """Keeps the global step where `compute_peaked_metrics` (which sees predictions only) can read it."""

    def on_step_end(self, args, state, control, **kwargs):
        STEP["global"] = state.global_step


def compute_peaked_metrics(prediction: Any) -> dict[str, float]:
    """Accuracy plus 1 at step 4 only: every trial's best evaluation is at step 4, whatever it trains on to."""
    accuracy = compute_metrics(prediction)["accuracy"]
    return {"accuracy": accuracy + (1.0 if STEP["global"] == 4 else 0.0)}


def model_init(params: dict[str, Any]) -> nn.Module:
    if params.get("explode"):
        raise RuntimeError("model_init exploded on purpose")
    return MLP(
        int(params.get("hidden", 16)),
        float(params.get("dropout", 0.0)),
        float(params.get("delay", 0.0)),
        bool(params.get("poison", False)),
    )


def set_dropout(model: nn.Module, value: float) -> None:
    """The task's `mutable: {dropout: ...}` entry: PBT changes the dropout of a model that is training."""
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = float(value)


def data(params: dict[str, Any]) -> tuple[Samples, Samples]:
    if params.get("data_explodes"):
        raise RuntimeError("data exploded on purpose")
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(384, FEATURES, generator=generator)
    centers = torch.randn(CLASSES, FEATURES, generator=generator) * 1.5
    y = torch.cdist(x, centers).argmin(dim=1)
    return Samples(x[:256], y[:256]), Samples(x[256:], y[256:])


def shared_data() -> tuple[Samples, Samples]:
    """`data` without parameters (the same datasets for every trial); each call appends its pid to the file named by
    $DATA_LOADS_FILE, so a test can count which processes loaded the data."""
    with open(os.environ["DATA_LOADS_FILE"], "a") as loads:
        loads.write(f"{os.getpid()}\n")
    return data({})


def compute_metrics(prediction: Any) -> dict[str, float]:
    logits = (
        prediction.predictions[0] if isinstance(prediction.predictions, tuple) else prediction.predictions
    )
    return {"accuracy": float((np.asarray(logits).argmax(-1) == np.asarray(prediction.label_ids)).mean())}


def write_study(folder: Path, **sections: Any) -> Path:
    """A study file in `folder` with this task, short training defaults, and `sections` merged over them."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(Path(__file__), folder / "study_task.py")
    spec: dict[str, Any] = {
        "study": {
            "name": "test",
            "output_dir": str(folder / "out"),
            "metric": "accuracy",
            "direction": "maximize",
            # No pruning unless a test asks for it: a study that names no pruner gets stop-type ASHA rungs, which
            # would stop trials these tests count as COMPLETE (the tests of that default name no pruner themselves).
            "pruner": {"type": "none"},
        },
        "task": {
            "model_init": "study_task:model_init",
            "data": "study_task:data",
            "compute_metrics": "study_task:compute_metrics",
        },
        "training": {
            "max_steps": 12,
            "per_device_train_batch_size": 32,
            "per_device_eval_batch_size": 128,
            "learning_rate": 0.01,
            "eval_strategy": "steps",
            "eval_steps": 4,
            "save_strategy": "steps",
            "save_steps": 4,
            "logging_steps": 4,
            "disable_tqdm": True,
        },
        "search_space": {"learning_rate": {"type": "float", "low": 1.0e-4, "high": 0.1, "log": True}},
        "tracking": {"store": False},
    }
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(spec.get(key), dict):
            spec[key] = {**spec[key], **value}
        else:
            spec[key] = value
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path
