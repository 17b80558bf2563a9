"""What the hand-written peers of the digits study share: its search space and one trial's training, written as a user
gluing a peer by hand would write it, with the study file's choices (studies/digits_mlp.yaml).

Same data split and model (studies/tasks/digits.py), AdamW with weight decay on matrices only, a cosine schedule with
5 % warm-up, gradient clipping at 1.0, batch 32 (eval 512), seed 0 before the model is built, one evaluation per epoch.
Each evaluation is kept as an event (trial, unix time, epoch, accuracy) and appended to a JSON-lines file when the
trial ends, so `bench/peers/compare.py` can find when each contender first reached a target accuracy.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from studies.tasks import digits  # noqa: E402

STUDY = "digits_mlp"
ENQUEUED = {
    "learning_rate": 0.003,
    "hidden_size": 128,
    "num_layers": 1,
    "activation": "relu",
    "weight_decay": 0.0001,
}
BATCH, EVAL_BATCH, WARMUP_RATIO, MAX_GRAD_NORM, SEED = 32, 512, 0.05, 1.0, 0
MODEL_KEYS = ("hidden_size", "num_layers", "activation", "dropout")


def sample(trial: Any) -> dict[str, Any]:
    """The study file's search space in its order, define-by-run (an optuna.Trial); dropout only for deeper MLPs."""
    params: dict[str, Any] = {
        "learning_rate": trial.suggest_float("learning_rate", 3.0e-4, 3.0e-2, log=True),
        "weight_decay": trial.suggest_float("weight_decay", 1.0e-6, 1.0e-2, log=True),
        "hidden_size": trial.suggest_int("hidden_size", 32, 256, step=32),
        "num_layers": trial.suggest_int("num_layers", 1, 3),
        "activation": trial.suggest_categorical("activation", ["relu", "gelu", "tanh"]),
    }
    if params["num_layers"] in (2, 3):
        params["dropout"] = trial.suggest_float("dropout", 0.0, 0.4)
    return params


def cosine_with_warmup(total: int) -> Any:
    warmup = math.ceil(total * WARMUP_RATIO)

    def factor(step: int) -> float:
        if step < warmup:
            return step / max(1, warmup)
        progress = (step - warmup) / max(1, total - warmup)
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))

    return factor


class DigitsRun:
    """One trial's model, optimizer, schedule and loaders; `epoch()` trains one epoch and returns eval accuracy."""

    def __init__(self, params: dict[str, Any], epochs: int, data: tuple[Any, Any]) -> None:
        train_set, eval_set = data
        torch.manual_seed(SEED)
        self.model = digits.model_init({k: params[k] for k in MODEL_KEYS if k in params})
        decay = [p for p in self.model.parameters() if p.ndim >= 2]
        no_decay = [p for p in self.model.parameters() if p.ndim < 2]
        groups = [
            {"params": decay, "weight_decay": params["weight_decay"]},
            {"params": no_decay, "weight_decay": 0.0},
        ]
        self.optimizer = torch.optim.AdamW(groups, lr=params["learning_rate"])
        generator = torch.Generator().manual_seed(SEED)
        self.train_loader = DataLoader(train_set, batch_size=BATCH, shuffle=True, generator=generator)
        self.eval_loader = DataLoader(eval_set, batch_size=EVAL_BATCH)
        total = epochs * len(self.train_loader)
        self.schedule = torch.optim.lr_scheduler.LambdaLR(self.optimizer, cosine_with_warmup(total))
        self.step = 0

    def epoch(self) -> float:
        self.model.train()
        for batch in self.train_loader:
            loss = self.model(**batch)["loss"]
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), MAX_GRAD_NORM)
            self.optimizer.step()
            self.schedule.step()
            self.step += 1
        return self.accuracy()

    def accuracy(self) -> float:
        self.model.eval()
        right = total = 0
        with torch.no_grad():
            for batch in self.eval_loader:
                logits = self.model(batch["pixels"])["logits"]
                right += int((logits.argmax(-1) == batch["labels"]).sum())
                total += len(batch["labels"])
        return right / total


class Events:
    """A trial's evaluations, appended to `path` as JSON lines when the trial ends (one write per trial)."""

    def __init__(self, path: str | Path | None, trial: Any) -> None:
        self.path, self.trial, self.rows = path, str(trial), []

    def add(self, epoch: float, accuracy: float, step: int | None = None) -> None:
        row = {"trial": self.trial, "time": time.time(), "epoch": epoch, "accuracy": accuracy}
        if step is not None:  # the MiniLM problem evaluates every few steps: its progress is counted in steps
            row["step"] = step
        self.rows.append(row)

    def write(self) -> None:
        if self.path is None or not self.rows:
            return
        with open(self.path, "a", encoding="utf-8") as handle:  # O_APPEND: whole lines from several processes
            handle.write("".join(json.dumps(row) + "\n" for row in self.rows))
