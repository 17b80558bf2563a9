"""The Trainer: a training loop you can read top to bottom (see `trainer.events.Event` for where callbacks fire).

Everything that is not the loop lives beside it: arguments (args.py), optimizers and schedules (optim.py), data
(data.py), checkpoints (checkpoint.py), precision (precision.py), evaluation (evaluation.py), devices and processes
(strategies/). The loop never asks which strategy it runs under; it asks the strategy to do things.
"""

from __future__ import annotations

import logging
import math
import time
import weakref
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from trainer import checkpoint as ckpt
from trainer.adapters import AdaLoraAllocation, check_prefix_tuning, needs_rank_allocation
from trainer.adapters import check_strategy as check_adapter_strategy
from trainer.args import IntervalStrategy, SaveStrategy, TrainingArguments
from trainer.callbacks import (
    CallbackHandler,
    DefaultFlowCallback,
    PrinterCallback,
    ProgressCallback,
    export_callback_states,
    recreate_callbacks,
    restore_callback_states,
)
from trainer.checkpoint_finisher import CheckpointFinisher
from trainer.columns import drop_unused_columns
from trainer.data import (
    accumulation_windows,
    batch_size_of,
    eval_dataloader,
    start_epoch,
    tokens_in,
    train_dataloader,
)
from trainer.errors import TrainerConfigError, TrainerError
from trainer.events import Event
from trainer.file_modes import follow_umask
from trainer.hub import HubMixin
from trainer.integrations import reporting_callbacks
from trainer.label_smoothing import smoothed_loss_and_outputs
from trainer.memory import MemoryTracker, empty_device_cache, track_memory
from trainer.meter import create_loss_meter
from trainer.modeling import (
    call_model,
    is_mapping,
    labels_of,
    prepare_model,
    split_labels,
    training_flos_per_token,
)
from trainer.neftune import activate_neftune
from trainer.optim import (
    create_optimizer,
    create_scheduler,
    current_learning_rate,
    parameter_groups,
    steps_with_scheduler,
)
from trainer.outputs import PredictionOutput, TrainOutput, loss_and_logits, loss_of, without_keys
from trainer.plan import TrainingPlan, build_plan
from trainer.public_api import PublicMethodsMixin
from trainer.reporting import MetricsReportingMixin
from trainer.search import search_backend
from trainer.seed import enable_full_determinism, set_seed
from trainer.state import TrainerControl, TrainerState
from trainer.strategies import create_strategy

logger = logging.getLogger(__name__)

# transformers' names: the callbacks every Trainer has (besides the progress bar or printer), the state file's name
DEFAULT_CALLBACKS = [DefaultFlowCallback]
TRAINER_STATE_NAME = ckpt.STATE_FILE


class Trainer(MetricsReportingMixin, HubMixin, PublicMethodsMixin):
    """Train, evaluate and predict with any `torch.nn.Module` (transformers models included).

    The model returns its loss (a scalar tensor, or `loss` in a dict or output object), or `compute_loss_func(outputs,
    labels, num_items_in_batch=...)` computes it. Dict batches are passed as keyword arguments, tuples as positional
    ones; for evaluation the labels are `label_names` of a dict batch or the last element of a tuple batch.
    """

    def __init__(
        self,
        model: torch.nn.Module | None = None,
        args: TrainingArguments | None = None,
        data_collator: Any = None,
        train_dataset: Dataset | None = None,
        eval_dataset: Dataset | dict[str, Dataset] | None = None,
        # transformers' order from here on too, so that positional arguments land where they do there
        processing_class: Any = None,
        model_init: Any = None,
        compute_loss_func: Any = None,
        compute_metrics: Any = None,
        callbacks: list[Any] | None = None,
        optimizers: tuple[Any, Any] = (None, None),
        optimizer_cls_and_kwargs: tuple[type, dict[str, Any]] | None = None,
        preprocess_logits_for_metrics: Any = None,
    ) -> None:
        self.args = args if args is not None else TrainingArguments()
        if model is None and model_init is None:
            raise TrainerConfigError(
                "Trainer needs a model or a model_init (a function that returns the model)"
            )
        if optimizer_cls_and_kwargs is not None and optimizers[0] is not None:
            raise TrainerConfigError(
                "pass either optimizers or optimizer_cls_and_kwargs, not both: the optimizer would be built twice"
            )
        self.optimizer_cls_and_kwargs = optimizer_cls_and_kwargs
        # First: a tracker whose package is missing is refused before the model is built
        reporting = reporting_callbacks(self.args.report_to)
        if model_init is not None and optimizers != (None, None):
            raise TrainerConfigError(
                "optimizers cannot be passed with model_init: each new model needs its own"
            )
        self.strategy = create_strategy(self.args)
        self.strategy.setup_environment()
        self._finisher = CheckpointFinisher()
        self._memory = MemoryTracker(self.args.skip_memory_metrics, self.strategy.device)
        self._memory.start("init")
        self._seed()
        self.model_init = model_init
        self.model = model if model is not None else self._call_model_init()
        self._model_used = False
        self._model_placed = False
        self.data_collator = data_collator
        self.train_dataset, self.eval_dataset = train_dataset, eval_dataset
        self.compute_metrics = compute_metrics
        self.preprocess_logits_for_metrics = preprocess_logits_for_metrics
        self.compute_loss_func = compute_loss_func
        self.processing_class = processing_class
        self.optimizer, self.lr_scheduler = optimizers
        self._user_optimizers = optimizers
        self.state = TrainerState(
            is_local_process_zero=self.strategy.is_local_zero,
            is_world_process_zero=self.strategy.is_global_zero,
        )
        self.control = TrainerControl()
        default = [DefaultFlowCallback, PrinterCallback if self.args.disable_tqdm else ProgressCallback]
        default += reporting  # report_to's trackers before the user's callbacks, as transformers orders them
        self.callback_handler = CallbackHandler(default + list(callbacks or []))
        self.callback_handler.bind(
            # A weak proxy: the handler is the Trainer's own, and a strong reference back would make a cycle that
            # keeps a dropped Trainer (its model, optimizer, CUDA memory) until the garbage collector comes round.
            trainer=weakref.proxy(self),
            model=self.model,
            processing_class=processing_class,
            optimizer=None,
            lr_scheduler=None,
        )
        self.is_in_train = False  # transformers' flag: evaluate() casts for *_full_eval only outside training
        self._neftune_hook: Any = None
        if self.args.log_level != "passive" or self.args.log_level_replica != "warning":
            logging.getLogger("trainer").setLevel(self.args.get_process_log_level())
        self._memory.stop("init")
        self.fire(Event.ON_INIT_END)

    # ---- callbacks ---------------------------------------------------------------------------------------------
    def add_callback(self, callback: Any) -> None:
        self.callback_handler.add_callback(callback)

    def pop_callback(self, callback: Any) -> Any:
        return self.callback_handler.pop_callback(callback)

    def remove_callback(self, callback: Any) -> None:
        self.callback_handler.remove_callback(callback)

    def fire(self, event: Event, **extra: Any) -> TrainerControl:
        if not self.callback_handler.hooks[event]:  # the usual case for most events: no call at all
            return self.control
        return self.callback_handler.call(event, self.args, self.state, self.control, **extra)

    # ---- training ----------------------------------------------------------------------------------------------
    @track_memory("train")  # reported by _finish_training, so that the final log holds the figures
    def train(self, resume_from_checkpoint: bool | str | Path | None = None, **unused: Any) -> TrainOutput:
        """Train for `max_steps` (or `num_train_epochs`); `resume_from_checkpoint=True` continues the newest
        complete checkpoint in output_dir, a path continues that one."""
        if self.train_dataset is None:
            raise TrainerConfigError("train() needs a train_dataset")
        if self.args.eval_strategy != IntervalStrategy.NO and self.eval_dataset is None:
            raise TrainerConfigError(
                f"eval_strategy is '{self.args.eval_strategy.value}' but the Trainer has no eval_dataset; "
                "pass one, or set eval_strategy to 'no'"
            )
        checkpoint = ckpt.resolve_resume(resume_from_checkpoint, self.args.output_dir)
        if self.model_init is not None and self._model_used:
            self._seed()
            self.model = self._call_model_init()  # every train() call starts from a fresh model
            self._model_placed = False
        self._model_used = True
        batch_size = self.args.per_device_train_batch_size
        if not self.args.auto_find_batch_size:
            return self._train_loop(batch_size, checkpoint)
        from accelerate.utils import find_executable_batch_size

        if checkpoint is not None:  # continue with the batch size the first run found
            saved = TrainerState.load_from_json(checkpoint / ckpt.STATE_FILE)
            batch_size = saved.train_batch_size or batch_size
        tried = [batch_size]

        # accelerate's default shrinks the batch by 10% per failure; halving finds a fit in fewer failed attempts
        def halve() -> int:
            tried.append(tried[-1] // 2)
            return tried[-1]

        find = find_executable_batch_size(
            self._train_with_batch_size, starting_batch_size=batch_size, reduce_batch_size_fn=halve
        )
        return find(checkpoint)

    def _train_with_batch_size(self, batch_size: int, checkpoint: Path | None) -> TrainOutput:
        if batch_size != self.args.per_device_train_batch_size and self.model_init is not None:
            self._seed()
            self.model = self._call_model_init()  # the failed attempt may have moved the weights
        logger.info("training with per-device batch size %d", batch_size)
        return self._train_loop(batch_size, checkpoint)

    def _train_loop(self, batch_size: int, checkpoint: Path | None) -> TrainOutput:
        args = self.args
        self.is_in_train = True
        self._seed()  # the run's random stream starts here, whatever ran before
        loader = self.get_train_dataloader(batch_size)
        plan = build_plan(args, loader)
        self._setup_model_and_optimizer(plan, loader)
        self.state = self._new_state(plan, batch_size)
        self.control._new_training()
        self.fire(Event.ON_TRAIN_BEGIN)
        first_epoch, steps_to_skip = self._resume(checkpoint, plan) if checkpoint else (0, 0)
        self._start_meters()
        if args.eval_on_start and checkpoint is None:
            self._evaluate()
        if checkpoint is not None:
            ckpt.load_rng_state(checkpoint, self.strategy.rank)  # last: nothing else may draw before step one
        try:
            for epoch in range(first_epoch, plan.num_epochs):
                if self.state.global_step >= plan.max_steps:
                    break  # resumed from the run's last checkpoint: nothing left to train
                skip = steps_to_skip * args.gradient_accumulation_steps if epoch == first_epoch else 0
                self._train_epoch(loader, plan, epoch, skip)
                if self.control.should_training_stop or self.state.global_step >= plan.max_steps:
                    break
        except BaseException:
            self._settle_checkpoints_quietly()  # what was saved before the failure is still put in place
            raise
        self._finisher.wait(
            close=True
        )  # training ends with every checkpoint in place (the best may be loaded)
        return self._finish_training()

    def _settle_checkpoints_quietly(self) -> None:
        try:
            self._finisher.wait(close=True)
        except Exception as error:  # noqa: BLE001 - the training's own failure is the one to raise
            logger.warning("a checkpoint could not be put in place: %s", error)

    def _train_epoch(self, loader: DataLoader, plan: TrainingPlan, epoch: int, skip_batches: int) -> None:
        state, control, accumulation = self.state, self.control, self.args.gradient_accumulation_steps
        control._new_epoch()
        self.model.train()
        self.fire(Event.ON_EPOCH_BEGIN)
        steps_in_epoch = plan.steps_per_epoch or plan.max_steps
        step_in_epoch = skip_batches // accumulation
        batches = start_epoch(loader, epoch, self.args.sampler_seed, skip_batches)
        for window in accumulation_windows(batches, accumulation):
            self.fire(Event.ON_STEP_BEGIN)
            step_loss = self._optimizer_step(window)
            state.global_step += 1
            step_in_epoch += 1
            state.epoch = epoch + step_in_epoch / steps_in_epoch
            self._loss_meter.add(step_loss, state.global_step)
            self.fire(Event.ON_STEP_END)
            if control.should_log or control.should_evaluate or control.should_save:
                self._log_evaluate_save()
            if (
                control.should_epoch_stop
                or control.should_training_stop
                or state.global_step >= plan.max_steps
            ):
                break
        self.fire(Event.ON_EPOCH_END)
        self._log_evaluate_save()

    def _optimizer_step(self, window: list[Any]) -> torch.Tensor:
        """Forward and backward over one accumulation window, then clip and step. Returns the window's loss."""
        model, optimizer, strategy = self.model, self.optimizer, self.strategy
        every = self.args.torch_empty_cache_steps
        if every and self.state.global_step % every == 0:
            empty_device_cache(strategy.device)
        if len(window) == 1:
            batch = window[0]
            self._samples_since_log += batch_size_of(batch)
            self._tokens_since_log += tokens_in(batch, *self._token_counting)
            step_loss = self.training_step(model, batch)
        else:
            # Weight each micro-batch by its share of the window's samples: the mean over the window equals the
            # mean over one big batch, also for the last, shorter window of an epoch.
            sizes = [batch_size_of(batch) for batch in window]
            total = sum(sizes)
            self._samples_since_log += total
            self._tokens_since_log += sum(tokens_in(batch, *self._token_counting) for batch in window)
            step_loss = 0.0
            for i, batch in enumerate(window):
                last = i == len(window) - 1
                with strategy.no_backward_sync(model, enabled=not last):
                    step_loss = step_loss + self.training_step(model, batch, loss_weight=sizes[i] / total)
                if not last:
                    self.fire(Event.ON_SUBSTEP_END)
        self.fire(Event.ON_PRE_OPTIMIZER_STEP)
        self._grad_norm = strategy.clip_grad_norm(model, optimizer, self.args.max_grad_norm)
        stepped = strategy.optimizer_step(model, optimizer)  # False when an fp16 step overflowed
        if self._grad_norm is None:  # DeepSpeed clips, and measures the norm, inside its step
            self._grad_norm = strategy.grad_norm_after_step()
        self.fire(Event.ON_OPTIMIZER_STEP)
        if stepped and self._scheduler_per_step:
            self.lr_scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        return step_loss

    def training_step(self, model: torch.nn.Module, inputs: Any, loss_weight: float = 1.0) -> torch.Tensor:
        """Forward and backward of one micro-batch; returns the detached loss times `loss_weight`."""
        inputs = self.strategy.move_batch(inputs)
        with self.compute_loss_context_manager():
            loss = self.compute_loss(model, inputs)
        if loss_weight != 1.0:
            loss = loss * loss_weight
        self.strategy.backward(loss, model, self.optimizer)
        return loss.detach()

    def compute_loss(
        self,
        model: torch.nn.Module,
        inputs: Any,
        return_outputs: bool = False,
        num_items_in_batch: int | None = None,
    ) -> Any:
        if self.compute_loss_func is not None:
            features, labels = split_labels(inputs, self.args.label_names)
            outputs = call_model(model, features)
            n_items = num_items_in_batch if num_items_in_batch is not None else batch_size_of(inputs)
            loss = self.compute_loss_func(outputs, labels, num_items_in_batch=n_items)
        elif self._smooths_labels(inputs):
            loss, outputs = self._smoothed_loss_and_outputs(model, inputs)
        else:
            outputs = call_model(model, inputs)
            loss = loss_of(outputs)
            if loss is None or loss.ndim != 0:
                raise TrainerError(
                    f"{type(self.strategy.unwrap(model)).__name__} returned no scalar loss: return the loss (a "
                    "0-d tensor, or 'loss' in a dict or output object), pass labels the model uses, or give the "
                    "Trainer a compute_loss_func(outputs, labels, num_items_in_batch)"
                )
        return (loss, outputs) if return_outputs else loss

    def _smooths_labels(self, inputs: Any) -> bool:
        """Whether the loss is transformers' label-smoothed one: `label_smoothing_factor` set, a dict batch with labels."""
        return self.args.label_smoothing_factor > 0 and is_mapping(inputs) and "labels" in inputs

    def _smoothed_loss_and_outputs(self, model: torch.nn.Module, inputs: Any) -> tuple[torch.Tensor, Any]:
        unwrapped = self.strategy.unwrap(model)
        return smoothed_loss_and_outputs(model, unwrapped, inputs, self.args.label_smoothing_factor)

    # ---- what happens between steps ---------------------------------------------------------------------------
    def _log_evaluate_save(self) -> None:
        control = self.control
        if control.should_log:
            self._log_training()
        improved = self._evaluate() if control.should_evaluate else False
        if control.should_save or (improved and self.args.save_strategy == SaveStrategy.BEST):
            self._save_checkpoint()
        control._new_step()

    def _log_training(self) -> None:
        mean_loss, steps = self._loss_meter.pop_mean()
        mean_loss = self.strategy.mean_over_ranks(mean_loss)  # the logged loss is the mean over all ranks
        self._loss_sum += mean_loss * steps if steps else 0.0
        self._loss_steps += steps
        logs: dict[str, float] = {"loss": mean_loss}
        if self._grad_norm is not None:
            logs["grad_norm"] = float(self._grad_norm)
        logs["learning_rate"] = current_learning_rate(self.optimizer)
        logs.update(self._throughput())
        self.log(logs)

    def _throughput(self) -> dict[str, float]:
        now = time.perf_counter()
        elapsed = max(now - self._last_log_time, 1e-9)
        steps = self.state.global_step - self._last_log_step
        # Every rank sees its own equal share of each global batch (the distributed samplers pad or drop to make the
        # shares equal), so the job's figures are one rank's times the world size: no collective on the hot path.
        world = self.strategy.world_size
        samples, tokens = self._samples_since_log * world, self._tokens_since_log * world
        rates = {
            "train_samples_per_second": round(samples / elapsed, 3),
            "train_steps_per_second": round(steps / elapsed, 3),
        }
        if tokens:
            rates["train_tokens_per_second"] = round(tokens / elapsed, 3)
        self.state.num_input_tokens_seen += tokens
        self.state.total_flos += tokens * self._flos_per_token
        self._samples_done += self._samples_since_log  # this rank's; _samples_total scales by world size
        self._last_log_time, self._last_log_step = now, self.state.global_step
        self._samples_since_log = self._tokens_since_log = 0
        return rates

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """Add `epoch` (and `num_input_tokens_seen` when asked), append to state.log_history (with `step`) and fire
        on_log. `start_time` is transformers' argument; throughput is already in the training logs."""
        if self.state.epoch is not None:
            logs["epoch"] = self.state.epoch
        if self.args.include_num_input_tokens_seen != "no":
            logs["num_input_tokens_seen"] = self.state.num_input_tokens_seen
        self.state.log_history.append({**logs, "step": self.state.global_step})
        self.fire(Event.ON_LOG, logs=logs)

    def _evaluate(self) -> bool:
        """Evaluate during training; update the best metric; step ReduceLROnPlateau. True when the best improved."""
        self._loss_meter.check(self.state.global_step)
        metrics = self.evaluate()
        name = self.args.best_metric_name
        if name is not None and name not in metrics:
            raise TrainerConfigError(
                f"metric_for_best_model is '{self.args.metric_for_best_model}' but the evaluation returned no "
                f"'{name}'; the metrics are {sorted(metrics)} (with a dict of eval datasets, name one, "
                "e.g. 'eval_<dataset>_loss')"
            )
        plateau_metric = metrics.get(name or "eval_loss")
        if self.lr_scheduler is not None and not self._scheduler_per_step and plateau_metric is not None:
            self.lr_scheduler.step(plateau_metric)  # ReduceLROnPlateau follows evaluations, not steps
        return self._update_best(metrics.get(name)) if name else False

    def _update_best(self, value: float | None) -> bool:
        if value is None or not math.isfinite(value):
            return False
        best = self.state.best_metric
        if best is not None and (value <= best if self.args.higher_is_better else value >= best):
            return False
        self.state.best_metric, self.state.best_global_step = float(value), self.state.global_step
        return True

    # ---- evaluation and prediction ----------------------------------------------------------------------------
    @track_memory("eval", metrics_of=lambda metrics: metrics)
    def evaluate(
        self,
        eval_dataset: Dataset | dict[str, Dataset] | None = None,
        ignore_keys: Any = None,
        metric_key_prefix: str = "eval",
    ) -> dict[str, float]:
        """Metrics named `<prefix>_<metric>` (`eval_<name>_<metric>` for each dataset of a dict)."""
        dataset = eval_dataset if eval_dataset is not None else self.eval_dataset
        if dataset is None:
            raise TrainerConfigError(
                "evaluate() needs an eval_dataset (pass one to the Trainer or to evaluate())"
            )
        if isinstance(dataset, dict):
            metrics: dict[str, float] = {}
            for name, part in dataset.items():
                metrics.update(self.evaluate(part, metric_key_prefix=f"{metric_key_prefix}_{name}"))
            return metrics
        self._place_model()
        loader = self.get_eval_dataloader(dataset)
        output = self.evaluation_loop(
            loader, "Evaluation", ignore_keys=ignore_keys, metric_key_prefix=metric_key_prefix
        )
        metrics = output.metrics
        self.log(metrics)
        self.fire(Event.ON_EVALUATE, metrics=metrics, eval_dataloader=loader)
        return metrics

    @track_memory("test", metrics_of=lambda output: output.metrics)
    def predict(
        self, test_dataset: Dataset, ignore_keys: Any = None, metric_key_prefix: str = "test"
    ) -> PredictionOutput:
        self._place_model()
        loader = self.get_test_dataloader(test_dataset)
        output = self.evaluation_loop(loader, "Prediction", False, ignore_keys, metric_key_prefix)
        self.fire(Event.ON_PREDICT, metrics=output.metrics, eval_dataloader=loader)
        return PredictionOutput(output.predictions, output.label_ids, output.metrics)

    def prediction_step(
        self, model: torch.nn.Module, inputs: Any, prediction_loss_only: bool, ignore_keys: Any = None
    ) -> tuple[torch.Tensor | None, Any, Any]:
        """(loss, logits, labels) of one batch, without gradients."""
        labels = labels_of(inputs, self.args.label_names)
        with torch.no_grad(), self.strategy.autocast():
            if self.compute_loss_func is not None:
                features, labels = split_labels(inputs, self.args.label_names)
                outputs = call_model(model, features)
                loss = self.compute_loss_func(outputs, labels, num_items_in_batch=batch_size_of(inputs))
                logits = loss_and_logits(outputs)[1] if not torch.is_tensor(outputs) else outputs
            elif self._smooths_labels(inputs):
                # transformers' prediction_step goes through compute_loss: the evaluation loss is smoothed too
                loss, outputs = self._smoothed_loss_and_outputs(model, inputs)
                logits = loss_and_logits(without_keys(outputs, ignore_keys))[1]
            else:
                loss, logits = loss_and_logits(without_keys(call_model(model, inputs), ignore_keys))
        return loss, (None if prediction_loss_only else logits), labels

    # ---- checkpoints ------------------------------------------------------------------------------------------
    def _save_checkpoint(self) -> Path:
        state, args, strategy = self.state, self.args, self.strategy
        step = state.global_step
        if state.best_global_step == step:
            state.best_model_checkpoint = str(ckpt.checkpoint_dir(args.output_dir, step))
        state.stateful_callbacks = export_callback_states([*self.callback_handler.callbacks, self.control])
        if strategy.world_size > 1 or not self._writes_checkpoints():
            path = ckpt.write_atomically(
                args.output_dir,
                step,
                self._write_checkpoint,
                is_main=self._writes_checkpoints(),
                barrier=strategy.barrier,
            )
            if self._writes_checkpoints():
                ckpt.rotate_checkpoints(args.output_dir, args.save_total_limit, state.best_model_checkpoint)
        else:
            path = self._save_in_background(step)
        if any(_needs_checkpoint_in_place(hook) for hook in self.callback_handler.hooks[Event.ON_SAVE]):
            self.wait_for_checkpoints()  # a callback that may read the checkpoint at on_save finds it in place
        self.fire(Event.ON_SAVE)
        return path

    def _save_in_background(self, step: int) -> Path:
        """One process: the files are written here, their fsync, the rename and the rotation run on the finisher's
        thread (trainer.checkpoint_finisher), so the step loop never waits for the disk."""
        args, best = self.args, self.state.best_model_checkpoint
        if not self._finisher.started:
            ckpt.remove_stale_temporaries(
                args.output_dir
            )  # every leftover of a crashed run, before any save of this
        # The previous save in place first: a crash then loses at most the save under way, as with a synchronous
        # save. Saves a few hundred steps apart never wait here (an fsync is tens of milliseconds).
        self._finisher.wait()
        ckpt.write_temporary(
            args.output_dir, step, self._write_checkpoint, is_main=True, barrier=lambda: None
        )

        def finish() -> None:
            ckpt.publish(args.output_dir, step, in_background=True)
            ckpt.rotate_checkpoints(args.output_dir, args.save_total_limit, best)

        self._finisher.submit(step, finish)
        return ckpt.checkpoint_dir(args.output_dir, step)

    def wait_for_checkpoints(self) -> None:
        """Until every checkpoint saved so far is in place (renamed, rotated); raises a failure of their writing."""
        self._finisher.wait()

    def checkpoint_in_flight(self, step: int) -> bool:
        """Whether the checkpoint of `step` is saved but not yet in place (written, its fsync and rename to come)."""
        return self._finisher.in_flight(step)

    def _write_checkpoint(self, folder: Path) -> None:
        self.strategy.save_checkpoint(folder, self.model, self.optimizer, self.lr_scheduler)
        ckpt.save_rng_state(folder, self.strategy.rank)
        if self._writes_checkpoints():
            (folder / ckpt.ARGS_FILE).write_text(self.args.to_json(), encoding="utf-8")
            # what transformers' checkpoints also hold: the model's config (from_pretrained(checkpoint) works) and
            # the processing class. Not training_args.bin: a pickle; the arguments are in training_args.json
            ckpt.save_pretrained_extras(self.strategy.unwrap(self.model), self.processing_class, folder)
            self.state.save_to_json(folder / ckpt.STATE_FILE)  # written last: its presence marks completeness

    def _writes_checkpoints(self) -> bool:
        """The process that writes shared checkpoint files: the job's main one, or with save_on_each_node (nodes
        without a shared disk) each node's main one."""
        strategy = self.strategy
        return strategy.is_local_zero if self.args.save_on_each_node else strategy.is_global_zero

    def _resume(self, checkpoint: Path, plan: TrainingPlan) -> tuple[int, int]:
        """Restore weights, optimizer, scheduler, state and callbacks; return (epoch, steps into it) to start at."""
        ckpt.check_resumable(checkpoint)
        saved = TrainerState.load_from_json(checkpoint / ckpt.STATE_FILE)
        self.strategy.load_checkpoint(checkpoint, self.model, self.optimizer, self.lr_scheduler)
        self.state.restore_progress(saved)
        if self.args.restore_callback_states_from_checkpoint:
            self._load_callback_state()
            self.control._new_training()  # a resumed run goes on: the saved stop flag ended the run that saved it
            self.control._new_step()
        else:
            restore_callback_states(self.callback_handler.callbacks, saved.stateful_callbacks)
        skip_seen = (
            not self.args.ignore_data_skip
        )  # ignore_data_skip: start the current epoch from its beginning
        if plan.steps_per_epoch is None:  # a dataset without length is one long epoch
            return 0, saved.global_step if skip_seen else 0
        epoch, steps_into_epoch = divmod(saved.global_step, plan.steps_per_epoch)
        return epoch, steps_into_epoch if skip_seen else 0

    def _finish_training(self) -> TrainOutput:
        state = self.state
        if self._loss_meter is not None:
            mean, steps = self._loss_meter.pop_mean()
            mean = self.strategy.mean_over_ranks(mean)
            if steps:
                self._loss_sum += mean * steps
                self._loss_steps += steps
        state.num_input_tokens_seen += self._tokens_since_log
        state.total_flos += self._tokens_since_log * self._flos_per_token
        self._tokens_since_log = 0
        best = state.best_model_checkpoint
        if self.args.load_best_model_at_end and best and Path(best).is_dir():
            logger.info(
                "loading the best model from %s (%s = %s)",
                best,
                self.args.best_metric_name,
                state.best_metric,
            )
            self.strategy.load_model_weights(Path(best), self.model)
        runtime = time.perf_counter() - self._train_start
        steps_run = state.global_step - self._first_step
        training_loss = self._loss_sum / self._loss_steps if self._loss_steps else math.nan
        metrics = {
            "train_runtime": round(runtime, 4),
            "train_samples_per_second": round(self._samples_total() / runtime, 3) if runtime > 0 else 0.0,
            "train_steps_per_second": round(steps_run / runtime, 3) if runtime > 0 else 0.0,
            "total_flos": state.total_flos,
            "train_loss": training_loss,
        }
        if state.num_input_tokens_seen:
            metrics["train_tokens_per_second"] = round(state.num_input_tokens_seen / runtime, 3)
        if self._neftune_hook is not None:
            self._neftune_hook.remove()  # the noise is for training only
            self._neftune_hook = None
        self.is_in_train = False
        peaks = self._memory.stop("train", metrics)
        state.peak_memory = peaks.to_dict() if peaks else {}
        self.log(dict(metrics))
        self.fire(Event.ON_TRAIN_END)
        return TrainOutput(state.global_step, training_loss, {**metrics, "epoch": state.epoch})

    def _samples_total(self) -> int:
        """Samples trained on by the whole job (every rank's equal share)."""
        return (self._samples_done + self._samples_since_log) * self.strategy.world_size

    # ---- hyperparameter search ----------------------------------------------------------------------------------
    def hyperparameter_search(
        self,
        hp_space: Any = None,
        compute_objective: Any = None,
        n_trials: int = 20,
        direction: str | list[str] = "minimize",
        backend: str | None = None,
        hp_name: Any = None,
        **kwargs: Any,
    ) -> Any:
        """transformers' `Trainer.hyperparameter_search`, returning `BestRun(run_id, objective, hyperparameters)`.

        The search itself is a backend looked up by name (`trainer.search`; default "optuna", which hpo provides), so
        the trainer package depends on no search library."""
        search = search_backend(backend)
        return search(self, hp_space, compute_objective, n_trials, direction, hp_name=hp_name, **kwargs)

    # ---- model output -----------------------------------------------------------------------------------------
    def save_model(self, output_dir: str | Path | None = None) -> Path:
        """Consolidated weights as model.safetensors (save_pretrained layout for transformers models) + arguments."""
        folder = Path(output_dir or self.args.output_dir)
        state_dict = self.strategy.full_state_dict(self.model)  # every rank takes part
        if self.strategy.is_global_zero:
            folder.mkdir(parents=True, exist_ok=True)
            module = self.strategy.unwrap(self.model)
            if hasattr(module, "save_pretrained"):
                module.save_pretrained(str(folder), state_dict=state_dict)
            else:
                ckpt.save_weights(state_dict, folder / "model.safetensors")
            if self.processing_class is not None and hasattr(self.processing_class, "save_pretrained"):
                self.processing_class.save_pretrained(str(folder))
            (folder / ckpt.ARGS_FILE).write_text(self.args.to_json(), encoding="utf-8")
            follow_umask(folder)
        self.strategy.barrier()
        return folder

    # ---- building blocks (overridable) ------------------------------------------------------------------------
    def get_train_dataloader(self, batch_size: int | None = None) -> DataLoader:
        dataset, collator = self._without_unused_columns(self.train_dataset)
        sampler = self.strategy.train_sampler(dataset, shuffle=True, seed=self.args.sampler_seed)
        size = batch_size or self.args.per_device_train_batch_size
        loader = train_dataloader(dataset, self.args, size, collator, sampler)
        loader.total_batch_size = size * self.strategy.world_size  # accelerate's attribute, read by user code
        return loader

    def get_eval_dataloader(self, eval_dataset: Dataset | str | None = None) -> DataLoader:
        """The loader over `eval_dataset`: the Trainer's eval_dataset when None, or the one of that name when the
        Trainer holds a dict of them (as transformers)."""
        dataset, collator = self._without_unused_columns(self._eval_dataset_named(eval_dataset))
        loader = eval_dataloader(dataset, self.args, collator, self.strategy.eval_sampler(dataset))
        loader.total_batch_size = self.args.per_device_eval_batch_size * self.strategy.world_size
        return loader

    def get_test_dataloader(self, test_dataset: Dataset) -> DataLoader:
        dataset, collator = self._without_unused_columns(test_dataset)
        return eval_dataloader(dataset, self.args, collator, self.strategy.eval_sampler(dataset))

    def _without_unused_columns(self, dataset: Dataset) -> tuple[Dataset, Any]:
        if not self.args.remove_unused_columns:
            return dataset, self.data_collator
        model = self.strategy.unwrap(self.model)
        return drop_unused_columns(dataset, self.data_collator, model, self.args.label_names)

    def _eval_dataset_named(self, eval_dataset: Dataset | str | None) -> Dataset:
        if eval_dataset is not None and not isinstance(eval_dataset, str):
            return eval_dataset
        if self.eval_dataset is None:
            raise TrainerConfigError("no eval_dataset: pass one to the Trainer or to this call")
        if isinstance(eval_dataset, str):
            if not isinstance(self.eval_dataset, dict) or eval_dataset not in self.eval_dataset:
                names = sorted(self.eval_dataset) if isinstance(self.eval_dataset, dict) else []
                raise TrainerConfigError(f"no eval dataset named '{eval_dataset}'; the Trainer has {names}")
            return self.eval_dataset[eval_dataset]
        if isinstance(self.eval_dataset, dict):
            raise TrainerConfigError(
                f"the Trainer has several eval datasets ({sorted(self.eval_dataset)}): name the one to load"
            )
        return self.eval_dataset

    def _load_callback_state(self) -> None:
        """transformers' restore of `state.stateful_callbacks` (with restore_callback_states_from_checkpoint): each
        registered stateful callback and the control are re-created from the checkpoint's state."""
        if not self.args.restore_callback_states_from_checkpoint:
            return
        self.control, missing = recreate_callbacks(
            self.callback_handler, self.control, self.state.stateful_callbacks
        )
        if missing:
            logger.warning(  # formatted: the message names the callbacks for whoever reads it, tests included
                f"the checkpoint holds the state of callbacks this Trainer does not have, ignored: {', '.join(missing)}"
            )

    def create_optimizer(self, model: torch.nn.Module | None = None) -> torch.optim.Optimizer:
        """The optimizer over `model` (the placed/wrapped one during train(), else self.model): `args.optim`, or
        the class and keyword arguments given as `optimizer_cls_and_kwargs`."""
        target = model if model is not None else self.model
        decay_names = self.get_decay_parameter_names(target)
        if self.optimizer_cls_and_kwargs is not None:
            cls, kwargs = self.optimizer_cls_and_kwargs
            return cls(parameter_groups(target, self.args.weight_decay, decay_names), **kwargs)
        return create_optimizer(self.args, target, decay_names)

    def create_scheduler(self, num_training_steps: int, optimizer: torch.optim.Optimizer) -> Any:
        return create_scheduler(self.args, optimizer, num_training_steps)

    def _setup_model_and_optimizer(self, plan: TrainingPlan, loader: DataLoader) -> None:
        user_optimizer, user_scheduler = self._user_optimizers
        model = prepare_model(self.strategy.unwrap(self.model), self.args)
        check_adapter_strategy(self.strategy.name, model)  # refuse FSDP/ZeRO with an adapter before any step
        check_prefix_tuning(model)
        if needs_rank_allocation(model) and not any(
            isinstance(c, AdaLoraAllocation) for c in self.callback_handler.callbacks
        ):
            self.add_callback(AdaLoraAllocation())  # AdaLoRA's budget moves after each optimizer step

        def build_optimizer(wrapped: torch.nn.Module) -> torch.optim.Optimizer:
            return user_optimizer if user_optimizer is not None else self.create_optimizer(wrapped)

        def build_scheduler(optimizer: torch.optim.Optimizer) -> Any:
            if user_scheduler is not None:
                return user_scheduler
            return self.create_scheduler(plan.max_steps, optimizer)

        self.model, self.optimizer, self.lr_scheduler = self.strategy.setup(
            model, build_optimizer, build_scheduler
        )
        self._model_placed = True
        if self.args.neftune_noise_alpha is not None and self._neftune_hook is None:
            self._neftune_hook = activate_neftune(
                self.strategy.unwrap(self.model), self.args.neftune_noise_alpha
            )
        self._scheduler_per_step = steps_with_scheduler(self.lr_scheduler)
        self.callback_handler.bind(
            model=self.model,
            optimizer=self.optimizer,
            lr_scheduler=self.lr_scheduler,
            train_dataloader=loader,
        )

    def _new_state(self, plan: TrainingPlan, batch_size: int) -> TrainerState:
        previous = self.state  # hyperparameter-search fields set before train() survive
        return TrainerState(
            max_steps=plan.max_steps,
            num_train_epochs=plan.num_epochs,
            logging_steps=plan.logging_steps,
            eval_steps=plan.eval_steps,
            save_steps=plan.save_steps,
            train_batch_size=batch_size,
            is_local_process_zero=self.strategy.is_local_zero,
            is_world_process_zero=self.strategy.is_global_zero,
            is_hyper_param_search=previous.is_hyper_param_search,
            trial_name=previous.trial_name,
            trial_params=previous.trial_params,
        )

    def _start_meters(self) -> None:
        args = self.args
        self._loss_meter = create_loss_meter(
            self.strategy.device, args.logging_nan_inf_filter, args.max_non_finite_steps
        )
        self._loss_sum, self._loss_steps = 0.0, 0
        self._grad_norm = None
        self._samples_since_log = self._tokens_since_log = self._samples_done = 0
        # (non_padding, pad_token_id): without an attention mask, padding is told by the tokenizer's pad token
        self._token_counting = (
            args.include_num_input_tokens_seen == "non_padding",
            getattr(self.processing_class, "pad_token_id", None),
        )
        self._flos_per_token = training_flos_per_token(self.strategy.unwrap(self.model))
        self._train_start = self._last_log_time = time.perf_counter()
        self._first_step = self._last_log_step = self.state.global_step

    def _place_model(self) -> None:
        if not self._model_placed:
            self.model = self.model.to(self.strategy.device)
            self._model_placed = True

    def _call_model_init(self, trial: Any = None) -> torch.nn.Module:
        # transformers also accepts `model_init(trial)` (hyperparameter search); outside a search the trial is None.
        model = self.model_init(trial) if _takes_a_trial(self.model_init) else self.model_init()
        if model is None:
            raise TrainerConfigError("model_init returned None; it must return a torch.nn.Module")
        return model

    def _seed(self) -> None:
        if self.args.full_determinism:
            enable_full_determinism(self.args.seed)
        else:
            set_seed(self.args.seed)


def _takes_a_trial(model_init: Any) -> bool:
    """Whether model_init is transformers' one-argument form `model_init(trial)`."""
    import inspect

    try:
        parameters = inspect.signature(model_init).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty for p in parameters
    )


def _needs_checkpoint_in_place(hook: Any) -> bool:
    """An `on_save` hook reads the checkpoint unless its callback says it can do without it in place (its class sets
    `checkpoint_may_be_in_flight = True` and waits with `trainer.wait_for_checkpoints()` when it needs it)."""
    return not getattr(getattr(hook, "__self__", None), "checkpoint_may_be_in_flight", False)
