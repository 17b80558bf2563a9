"""One training job of the distributed tests, run by each rank (under `python -m trainer.launch`, torchrun, or alone).

It trains a small MLP classifier with the real Trainer on generated data, evaluates it, saves the consolidated model
and writes `result.json` (log history, eval metrics, rank layout) from rank 0. Options make it save, crash or resume.

    python -m trainer.launch --nproc 2 tests/distributed/job.py --out DIR --strategy ddp --max-steps 12
"""

from __future__ import annotations

import argparse
import json
import os
import signal
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from trainer import Trainer, TrainerCallback, TrainingArguments
from trainer.distributed import exit_rank
from trainer.launch import record

FEATURES, CLASSES = 16, 4


class Blobs(Dataset):
    """A fixed, generated classification data set (the same on every rank: a seeded generator)."""

    def __init__(self, size: int, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        centers = torch.randn(CLASSES, FEATURES, generator=torch.Generator().manual_seed(0)) * 2.0
        self.labels = torch.randint(0, CLASSES, (size,), generator=generator)
        self.x = centers[self.labels] + torch.randn(size, FEATURES, generator=generator)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[index], "labels": self.labels[index]}


class MLP(torch.nn.Module):
    """No dropout, no batch-dependent layers: the mean loss over 2 ranks' batches equals that of one big batch."""

    def __init__(self, hidden: int = 32) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Linear(FEATURES, hidden),
            torch.nn.Tanh(),
            torch.nn.Linear(hidden, hidden),
            torch.nn.Tanh(),
        )
        self.head = torch.nn.Linear(hidden, CLASSES)

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        logits = self.head(self.body(x)).float()
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = torch.nn.functional.cross_entropy(logits, labels)
        return out


def accuracy(prediction) -> dict[str, float]:
    return {"accuracy": float((np.argmax(prediction.predictions, axis=-1) == prediction.label_ids).mean())}


class KillAt(TrainerCallback):
    """SIGKILL this rank at the end of optimizer step `step`: no cleanup, no final save, like a node that dies."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            os.kill(os.getpid(), signal.SIGKILL)


class RaiseAt(TrainerCallback):
    """Raise on one rank only at step `step`: the other ranks go on into the next collective and must not hang."""

    def __init__(self, step: int, rank: int) -> None:
        self.step, self.rank = step, rank

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step and int(os.environ.get("RANK", "0")) == self.rank:
            raise RuntimeError(f"injected failure on rank {self.rank} at step {self.step}")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--strategy", default="auto")
    parser.add_argument("--max-steps", type=int, default=12)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--accumulation", type=int, default=1)
    parser.add_argument("--train-size", type=int, default=96)
    parser.add_argument("--eval-size", type=int, default=37)
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--fp16", action="store_true", help="fp16 with loss scaling (needs --cuda)")
    parser.add_argument("--cuda", action="store_true", help="train on the GPU (one rank per GPU; NCCL)")
    parser.add_argument(
        "--hidden", type=int, default=32, help="the MLP's width (bench/gpu/strategies.py: wider)"
    )
    parser.add_argument("--zero-stage", type=int, default=None)
    parser.add_argument("--offload", action="store_true", help="ZeRO: optimizer state offloaded to CPU")
    parser.add_argument("--fsdp-sharded", action="store_true", help="FSDP: SHARDED_STATE_DICT checkpoints")
    parser.add_argument("--save-steps", type=int, default=0)
    parser.add_argument("--kill-at", type=int, default=0)
    parser.add_argument("--raise-at", type=int, default=0)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--timeout", type=int, default=1800)
    parser.add_argument(
        "--load-best", action="store_true", help="evaluate+save every 4 steps; load the best at end"
    )
    parser.add_argument("--eval-weights", default=None, help="only evaluate these consolidated weights")
    return parser.parse_args(argv)


def training_arguments(options: argparse.Namespace) -> TrainingArguments:
    extra: dict = {}
    if options.zero_stage is not None:
        zero: dict = {"stage": options.zero_stage}
        if options.offload:
            zero["offload_optimizer"] = {"device": "cpu"}
        extra["deepspeed"] = {"zero_optimization": zero, "bf16": {"enabled": "auto"}}
    if options.strategy == "fsdp":
        extra["fsdp_config"] = {"transformer_layer_cls_to_wrap": ["Linear"]}
        if options.fsdp_sharded:
            extra["fsdp_config"]["state_dict_type"] = "SHARDED_STATE_DICT"
    if options.load_best:
        # "best" = the highest training-set loss seen at an evaluation: the first checkpoint, not the last one.
        extra.update(
            eval_strategy="steps",
            eval_steps=4,
            load_best_model_at_end=True,
            metric_for_best_model="loss",
            greater_is_better=True,
        )
    return TrainingArguments(
        output_dir=str(Path(options.out) / "run"),
        strategy=options.strategy,
        max_steps=options.max_steps,
        per_device_train_batch_size=options.batch,
        per_device_eval_batch_size=5,
        gradient_accumulation_steps=options.accumulation,
        learning_rate=1e-2,
        lr_scheduler_type="linear",
        warmup_steps=2,
        max_grad_norm=1.0,
        weight_decay=0.01,
        logging_steps=1,
        save_strategy="steps" if options.save_steps or options.load_best else "no",
        save_steps=4 if options.load_best else options.save_steps or 500,
        bf16=options.bf16,
        fp16=options.fp16,
        ddp_timeout=options.timeout,
        disable_tqdm=True,
        report_to="none",
        seed=1,
        # 2 CPU ranks with gloo by default, also where a GPU is present (a 1-GPU machine has no GPU for rank 1)
        use_cpu=not options.cuda,
        **extra,
    )


@record
def main(argv: list[str] | None = None) -> None:
    options = parse(argv)
    callbacks = []
    if options.kill_at:
        callbacks.append(KillAt(options.kill_at))
    if options.raise_at:
        callbacks.append(RaiseAt(options.raise_at, rank=1))
    trainer = Trainer(
        model_init=lambda: MLP(options.hidden),
        args=training_arguments(options),
        train_dataset=Blobs(options.train_size, seed=1),
        eval_dataset=Blobs(options.eval_size, seed=2),
        compute_metrics=accuracy,
        callbacks=callbacks,
    )
    try:
        result = run(trainer, options)
        if trainer.strategy.is_global_zero:
            Path(options.out).mkdir(parents=True, exist_ok=True)
            Path(options.out, "result.json").write_text(json.dumps(result, indent=1))
    finally:
        trainer.strategy.teardown()
    exit_rank(0)  # as `hpo train` ranks do: no interpreter finalization after a finished job


def run(trainer: Trainer, options: argparse.Namespace) -> dict:
    if options.eval_weights:
        from safetensors.torch import load_file

        trainer.model.load_state_dict(load_file(options.eval_weights))
        output = trainer.predict(trainer.eval_dataset, metric_key_prefix="eval")
        return {"eval": output.metrics, "predictions": output.predictions.tolist()}
    train = trainer.train(resume_from_checkpoint=True if options.resume else None)
    output = trainer.predict(trainer.eval_dataset, metric_key_prefix="eval")
    trainer.save_model(Path(options.out) / "final")
    return {
        "strategy": trainer.strategy.name,
        "world_size": trainer.strategy.world_size,
        "global_step": train.global_step,
        "train_runtime": train.metrics.get("train_runtime"),
        "best_model_checkpoint": trainer.state.best_model_checkpoint,
        "log_history": trainer.state.log_history,
        "eval": output.metrics,
        "predictions": output.predictions.tolist(),
    }


if __name__ == "__main__":
    main()
