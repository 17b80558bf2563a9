"""The evaluation/prediction loop: losses, gathered predictions and labels as numpy, metrics, speed."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch
from torch.utils.data import DataLoader

from trainer.data import batch_size_of, has_length
from trainer.eval_accumulation import PAD_INDEX, DeviceAccumulator
from trainer.events import Event
from trainer.outputs import EvalLoopOutput, EvalPrediction

if TYPE_CHECKING:
    from trainer.args import TrainingArguments
    from trainer.state import TrainerControl
    from trainer.strategies.base import Strategy


class EvaluatedTrainer(Protocol):
    """What the loop needs of the Trainer. A protocol rather than trainer.trainer.Trainer, which is built on this
    module: imports point one way, from the Trainer down to its loop, type hints included."""

    args: TrainingArguments
    model: torch.nn.Module
    strategy: Strategy
    compute_metrics: Any
    preprocess_logits_for_metrics: Any

    def prediction_step(
        self, model: torch.nn.Module, inputs: Any, prediction_loss_only: bool, ignore_keys: Any = None
    ) -> tuple[torch.Tensor | None, Any, Any]: ...

    def fire(self, event: Event, **extra: Any) -> TrainerControl: ...


def _concat(chunks: list[Any]) -> Any:
    """Concatenate per-batch arrays along dim 0; pad the other dims with -100 when batches differ (sequences)."""
    if isinstance(chunks[0], tuple):
        return tuple(_concat([c[i] for c in chunks]) for i in range(len(chunks[0])))
    if chunks[0].ndim == 0:
        return np.stack(chunks)
    shape = np.max([c.shape for c in chunks], axis=0)
    if all(c.shape[1:] == tuple(shape[1:]) for c in chunks):
        return np.concatenate(chunks, axis=0)
    total = sum(c.shape[0] for c in chunks)
    out = np.full((total, *shape[1:]), PAD_INDEX, dtype=chunks[0].dtype)
    row = 0
    for c in chunks:
        out[(slice(row, row + c.shape[0]), *(slice(0, s) for s in c.shape[1:]))] = c
        row += c.shape[0]
    return out


def _trim(values: Any, count: int | None) -> Any:
    """Drop the samples a distributed sampler repeated to give every rank the same number."""
    if values is None or count is None:
        return values
    if isinstance(values, tuple):
        return tuple(_trim(v, count) for v in values)
    return values[:count]


def _gathered(trainer: EvaluatedTrainer, value: Any) -> Any:
    """Every rank's part of a batch's output, still on the device."""
    if value is None:
        return None
    if isinstance(value, (tuple, list)):
        return tuple(_gathered(trainer, v) for v in value)
    return trainer.strategy.gather_for_eval(value.detach())


def _prefixed(metrics: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {(k if k.startswith(f"{prefix}_") else f"{prefix}_{k}"): v for k, v in metrics.items()}


def _as_float(value: Any) -> Any:
    return value.item() if isinstance(value, (np.generic, torch.Tensor)) else value


def _main_input(trainer: EvaluatedTrainer, batch: Any) -> torch.Tensor | None:
    """The model's main input (`main_input_name`, input_ids by default) of a dict batch, else the batch's first."""
    name = getattr(trainer.strategy.unwrap(trainer.model), "main_input_name", "input_ids")
    if hasattr(batch, "get") and torch.is_tensor(batch.get(name)):
        return batch[name]
    first = batch[0] if isinstance(batch, (tuple, list)) else None
    return first if torch.is_tensor(first) else None


def evaluation_loop(
    trainer: EvaluatedTrainer,
    loader: DataLoader,
    metric_key_prefix: str,
    prediction_loss_only: bool,
    ignore_keys: list[str] | None = None,
) -> EvalLoopOutput:
    """Run the model over `loader` without gradients and compute `<prefix>_loss`, metrics and speed."""
    model = trainer.model
    was_training = model.training
    model.eval()
    start = time.perf_counter()
    # moved to the CPU every eval_accumulation_steps batches (every batch when unset)
    every = trainer.args.eval_accumulation_steps or 1
    losses, predictions, labels, inputs = (DeviceAccumulator(every) for _ in range(4))
    include = trainer.args.include_for_metrics
    batch_metrics = trainer.args.batch_eval_metrics and trainer.compute_metrics is not None
    metrics: dict[str, Any] = {}
    total = len(loader) if has_length(loader) else None
    steps = 0
    for batch in loader:
        batch = trainer.strategy.move_batch(batch)
        loss, logits, label_ids = trainer.prediction_step(model, batch, prediction_loss_only, ignore_keys)
        if loss is not None:
            per_sample = loss.detach().float().reshape(1).repeat(batch_size_of(batch))
            losses.add(_gathered(trainer, per_sample))
        if logits is not None and trainer.preprocess_logits_for_metrics is not None:
            logits = trainer.preprocess_logits_for_metrics(logits, label_ids)
        if logits is not None:
            predictions.add(_gathered(trainer, logits))
        if label_ids is not None:
            labels.add(_gathered(trainer, label_ids))
        main_input = _main_input(trainer, batch) if "inputs" in include else None
        if main_input is not None:
            inputs.add(_gathered(trainer, main_input))
        steps += 1
        if batch_metrics:
            # transformers' batch_eval_metrics: tensors of this batch; the metrics of the last call are the result
            batch_loss = loss.detach().reshape(1) if loss is not None and "loss" in include else None
            result = trainer.compute_metrics(
                EvalPrediction(logits, label_ids, main_input, batch_loss), compute_result=steps == total
            )
            metrics = dict(result or {})
        trainer.fire(Event.ON_PREDICTION_STEP, eval_dataloader=loader)
    if was_training:
        model.train()
    losses, predictions, labels, inputs = (a.chunks() for a in (losses, predictions, labels, inputs))
    count = len(loader.dataset) if has_length(loader.dataset) else None
    all_preds = _trim(_concat(predictions), count) if predictions else None
    all_labels = _trim(_concat(labels), count) if labels else None
    if batch_metrics:
        metrics = {k: _as_float(v) for k, v in metrics.items()}
    elif trainer.compute_metrics is not None and all_preds is not None and all_labels is not None:
        all_inputs = _trim(_concat(inputs), count) if inputs else None
        all_losses = _trim(np.concatenate(losses), count) if losses and "loss" in include else None
        prediction = EvalPrediction(all_preds, all_labels, all_inputs, all_losses)
        metrics.update({k: _as_float(v) for k, v in trainer.compute_metrics(prediction).items()})
    if losses:
        metrics["loss"] = float(_trim(np.concatenate(losses), count).mean())
    runtime = time.perf_counter() - start
    samples = count if count is not None else sum(len(c) for c in losses)
    metrics.update(
        runtime=round(runtime, 4),
        samples_per_second=round(samples / runtime, 3) if runtime > 0 else 0.0,
        steps_per_second=round(steps / runtime, 3) if runtime > 0 else 0.0,
    )
    return EvalLoopOutput(all_preds, all_labels, _prefixed(metrics, metric_key_prefix), count)
