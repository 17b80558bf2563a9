"""Callbacks: the hooks of the loop (`TrainerCallback`), their dispatcher, and the built-in ones.

Where each event fires is drawn in `trainer.events.Event`. A method whose name starts with `on_` but is not an event
(say `on_evalute`) is refused when the callback is registered: a misspelt hook must not silently never run.
"""

from __future__ import annotations

import difflib
import logging
import math
import operator
from typing import Any

from trainer.args import IntervalStrategy, SaveStrategy, TrainingArguments
from trainer.errors import TrainerConfigError
from trainer.events import EVENT_NAMES, Event
from trainer.state import ExportableState, TrainerControl, TrainerState

logger = logging.getLogger(__name__)


class TrainerCallback:
    """Base class: override the events you need. Each gets `(args, state, control, **kwargs)` and may return a
    new `TrainerControl`. kwargs: model, optimizer, lr_scheduler, train_dataloader, eval_dataloader, trainer, and
    `metrics` (on_evaluate, on_predict) or `logs` (on_log)."""

    def on_init_end(self, args, state, control, **kwargs): ...
    def on_train_begin(self, args, state, control, **kwargs): ...
    def on_train_end(self, args, state, control, **kwargs): ...
    def on_epoch_begin(self, args, state, control, **kwargs): ...
    def on_epoch_end(self, args, state, control, **kwargs): ...
    def on_step_begin(self, args, state, control, **kwargs): ...
    def on_substep_end(self, args, state, control, **kwargs): ...
    def on_pre_optimizer_step(self, args, state, control, **kwargs): ...
    def on_optimizer_step(self, args, state, control, **kwargs): ...
    def on_step_end(self, args, state, control, **kwargs): ...
    def on_evaluate(self, args, state, control, **kwargs): ...
    def on_predict(self, args, state, control, **kwargs): ...
    def on_prediction_step(self, args, state, control, **kwargs): ...
    def on_save(self, args, state, control, **kwargs): ...
    def on_log(self, args, state, control, **kwargs): ...
    def on_push_begin(self, args, state, control, **kwargs): ...


def _exportable(callbacks: list[Any]) -> list[Any]:
    return [cb for cb in callbacks if isinstance(cb, ExportableState)]


def export_callback_states(callbacks: list[Any]) -> dict[str, Any]:
    """The state of each ExportableState (callbacks and the TrainerControl) by class name, a list for a class with
    several instances: the layout of transformers' trainer_state.json."""
    states: dict[str, Any] = {}
    for callback in _exportable(callbacks):
        name = type(callback).__name__
        if name not in states:
            states[name] = callback.state()
        elif isinstance(states[name], list):
            states[name].append(callback.state())
        else:
            states[name] = [states[name], callback.state()]
    return states


def _saved_by_class(saved: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {name: data if isinstance(data, list) else [data] for name, data in saved.items()}


def restore_callback_states(callbacks: list[Any], saved: dict[str, Any]) -> None:
    """Set saved attributes on the registered instances, in order within a class (the default on resume)."""
    by_class = _saved_by_class(saved)
    seen: dict[str, int] = {}
    for callback in _exportable(callbacks):
        name = type(callback).__name__
        index = seen.get(name, 0)
        seen[name] = index + 1
        if isinstance(callback, TrainerControl) or index >= len(by_class.get(name, [])):
            continue  # the control's flags belong to the step that was saved: this run starts afresh
        callback.load_state(by_class[name][index])


def recreate_callbacks(
    handler: CallbackHandler, control: TrainerControl, saved: dict[str, Any]
) -> tuple[TrainerControl, list[str]]:
    """transformers' `restore_callback_states_from_checkpoint`: replace each registered ExportableState (and the
    control) by one re-created from the checkpoint. Returns the control to use and the saved classes not registered."""
    by_class = _saved_by_class(saved)
    registered = [*_exportable(handler.callbacks), control]
    missing = [name for name in by_class if not any(type(cb).__name__ == name for cb in registered)]
    for name, states in by_class.items():
        instances = [cb for cb in registered if type(cb).__name__ == name]
        for instance, values in zip(instances, states, strict=False):
            fresh = type(instance).from_state(values)
            if isinstance(instance, TrainerControl):
                control = fresh
            else:
                position = handler.callbacks.index(instance)
                handler.callbacks[position] = fresh
    handler._rebuild()
    return control, missing


def check_event_names(callback: Any) -> None:
    """Refuse a callback with an `on_*` method that is not an event (a typo would otherwise never fire)."""
    for name in dir(callback):
        if name.startswith("on_") and callable(getattr(callback, name)) and name not in EVENT_NAMES:
            close = difflib.get_close_matches(name, sorted(EVENT_NAMES), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise TrainerConfigError(
                f"callback {type(callback).__name__} defines '{name}', which is not a trainer event{hint} "
                f"Events: {', '.join(e.value for e in Event)}"
            )


def _overrides(callback: Any, event: str) -> bool:
    method = getattr(type(callback), event, None)
    return method is not None and method is not getattr(TrainerCallback, event)


class CallbackHandler:
    """Calls the callbacks' hooks in order. Only overridden hooks are called, so an unused event costs nothing."""

    def __init__(self, callbacks: list[Any] | None = None, **bound: Any) -> None:
        """`bound`: objects every hook receives (transformers passes model, processing_class, optimizer,
        lr_scheduler positionally-named here)."""
        self.callbacks: list[Any] = []
        self.kwargs: dict[str, Any] = dict(bound)
        self.hooks: dict[str, list[Any]] = {}  # event -> bound methods that override it (read by the loop)
        for callback in callbacks or []:
            self.add_callback(callback)
        if not any(isinstance(cb, DefaultFlowCallback) for cb in self.callbacks):
            names = ", ".join(type(cb).__name__ for cb in self.callbacks) or "none"
            logger.warning(
                "the callbacks have no DefaultFlowCallback: nothing will decide when to log, evaluate, save or stop "
                f"(callbacks: {names})"  # noqa: G004
            )

    def add_callback(self, callback: Any) -> None:
        instance = callback() if isinstance(callback, type) else callback
        check_event_names(instance)
        if any(type(c) is type(instance) for c in self.callbacks):
            # formatted here, not lazily: transformers' tests (and users' log filters) read the message itself
            logger.warning(f"adding a second {type(instance).__name__} to the callbacks")  # noqa: G004
        self.callbacks.append(instance)
        self._rebuild()

    def pop_callback(self, callback: Any) -> Any | None:
        for existing in self.callbacks:
            if existing is callback or (isinstance(callback, type) and type(existing) is callback):
                self.callbacks.remove(existing)
                self._rebuild()
                return existing
        return None

    def remove_callback(self, callback: Any) -> None:
        self.pop_callback(callback)

    def bind(self, **kwargs: Any) -> None:
        """Objects handed to every hook (model, optimizer, ...); set once, not per call."""
        self.kwargs.update(kwargs)

    def _rebuild(self) -> None:
        # keyed by the Event member and by its name, so both `call(Event.ON_LOG)` and `call("on_log")` work
        self.hooks = {}
        for event in Event:
            hooks = [getattr(cb, event.value) for cb in self.callbacks if _overrides(cb, event.value)]
            self.hooks[event] = self.hooks[event.value] = hooks

    def call_event(
        self, event: str, args: TrainingArguments, state: TrainerState, control: TrainerControl, **extra: Any
    ) -> TrainerControl:
        """transformers' name for `call`."""
        return self.call(event, args, state, control, **extra)

    def has_hooks(self, event: str) -> bool:
        return bool(self.hooks[event])

    def call(
        self, event: str, args: TrainingArguments, state: TrainerState, control: TrainerControl, **extra: Any
    ) -> TrainerControl:
        hooks = self.hooks[event]
        if not hooks:  # most events have no hook in most runs: leave at once (this runs several times a step)
            return control
        kwargs = {**self.kwargs, **extra} if extra else self.kwargs
        for hook in hooks:
            result = hook(args, state, control, **kwargs)
            if result is not None and result is not control:
                # keep one control object: the loop and other callbacks hold a reference to it
                control.__dict__.update(result.__dict__)
        return control

    @property
    def callback_list(self) -> str:
        return "\n".join(type(cb).__name__ for cb in self.callbacks)


def _event_method(event: Event) -> Any:
    def fire(self: CallbackHandler, args: Any, state: Any, control: Any, **extra: Any) -> TrainerControl:
        return self.call(event, args, state, control, **extra)

    fire.__name__ = event.value
    fire.__doc__ = f"Call every callback's {event.value} (transformers' CallbackHandler.{event.value})."
    return fire


def _bound_property(name: str) -> property:
    def get(self: CallbackHandler) -> Any:
        return self.kwargs.get(name)

    def set_(self: CallbackHandler, value: Any) -> None:
        self.kwargs[name] = value

    return property(get, set_, doc=f"The {name} every hook receives.")


# transformers' CallbackHandler has one method per event and these attributes; ours are generated from Event.
for _event in Event:
    setattr(CallbackHandler, _event.value, _event_method(_event))
for _name in (
    "model",
    "processing_class",
    "optimizer",
    "lr_scheduler",
    "train_dataloader",
    "eval_dataloader",
):
    setattr(CallbackHandler, _name, _bound_property(_name))


class DefaultFlowCallback(TrainerCallback):
    """Decides when to log, evaluate, save and stop, from the interval strategies of the arguments."""

    def on_step_end(self, args, state, control, **kwargs):
        step = state.global_step
        if step == 1 and args.logging_first_step:
            control.should_log = True
        if args.logging_strategy == IntervalStrategy.STEPS and step % state.logging_steps == 0:
            control.should_log = True
        evaluating_by_steps = args.eval_strategy == IntervalStrategy.STEPS and args.eval_delay <= step
        if evaluating_by_steps and step % state.eval_steps == 0:
            control.should_evaluate = True
        if args.save_strategy == SaveStrategy.STEPS and step % state.save_steps == 0:
            control.should_save = True
        if step >= state.max_steps:
            control.should_training_stop = True
            if evaluating_by_steps:
                control.should_evaluate = True  # transformers 5: the final model is always evaluated
            if args.save_strategy == SaveStrategy.STEPS:
                control.should_save = True  # the last step is always saved
        return control

    def on_epoch_end(self, args, state, control, **kwargs):
        if args.logging_strategy == IntervalStrategy.EPOCH:
            control.should_log = True
        if args.eval_strategy == IntervalStrategy.EPOCH and args.eval_delay <= (state.epoch or 0):
            control.should_evaluate = True
        if args.save_strategy == SaveStrategy.EPOCH:
            control.should_save = True
        return control


def _format_logs(logs: dict[str, Any]) -> dict[str, Any]:
    return {k: (float(f"{v:.4g}") if isinstance(v, float) else v) for k, v in logs.items()}


class ProgressCallback(TrainerCallback):
    """A tqdm progress bar on the main process: step, eta, and the last logged loss and learning rate."""

    def __init__(self) -> None:
        self.bar = None

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=state.max_steps, initial=state.global_step, dynamic_ncols=True, unit="step")

    def on_step_end(self, args, state, control, **kwargs):
        if self.bar is not None:
            self.bar.update(state.global_step - self.bar.n)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.bar is None or not logs:
            return
        shown = {k: v for k, v in logs.items() if k in ("loss", "learning_rate", "eval_loss", "grad_norm")}
        if shown:
            self.bar.set_postfix(_format_logs(shown), refresh=False)
        if "loss" not in logs and "learning_rate" not in logs:
            self.bar.write(str(_format_logs(logs)))

    def on_train_end(self, args, state, control, **kwargs):
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class PrinterCallback(TrainerCallback):
    """Prints each log dict (used instead of the progress bar when `disable_tqdm` is set)."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs:
            print(_format_logs(logs), flush=True)


class EarlyStoppingCallback(TrainerCallback, ExportableState):
    """Stops training when `metric_for_best_model` has not improved by more than `early_stopping_threshold` for
    `early_stopping_patience` evaluations in a row. The counter is reset at train begin and saved in checkpoints."""

    def __init__(self, early_stopping_patience: int = 1, early_stopping_threshold: float = 0.0) -> None:
        if early_stopping_patience < 1:
            raise TrainerConfigError(f"early_stopping_patience must be >= 1, got {early_stopping_patience}")
        if early_stopping_threshold < 0:
            raise TrainerConfigError(f"early_stopping_threshold must be >= 0, got {early_stopping_threshold}")
        self.early_stopping_patience = early_stopping_patience
        self.early_stopping_threshold = early_stopping_threshold
        self.early_stopping_patience_counter = 0

    def on_train_begin(self, args, state, control, **kwargs):
        self.early_stopping_patience_counter = 0
        if args.best_metric_name is None:
            raise TrainerConfigError(
                "EarlyStoppingCallback needs 'metric_for_best_model' (for example 'eval_loss') in the arguments"
            )
        if args.eval_strategy == IntervalStrategy.NO:
            raise TrainerConfigError(
                "EarlyStoppingCallback needs evaluations: set 'eval_strategy' to steps or epoch"
            )

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        value = (metrics or {}).get(args.best_metric_name)
        if value is None or not math.isfinite(value):
            return
        self.check_metric_value(args, state, control, value)
        if self.early_stopping_patience_counter >= self.early_stopping_patience:
            control.should_training_stop = True

    def check_metric_value(self, args, state, control, metric_value: float) -> None:
        """Reset the patience counter when `metric_value` beats the best by more than the threshold, else count."""
        higher = getattr(args, "higher_is_better", None)
        if higher is None:  # transformers' form: arguments with greater_is_better only
            higher = bool(getattr(args, "greater_is_better", False))
        better = operator.gt if higher else operator.lt
        if state.best_metric is None or (
            better(metric_value, state.best_metric)
            and abs(metric_value - state.best_metric) > self.early_stopping_threshold
        ):
            self.early_stopping_patience_counter = 0
        else:
            self.early_stopping_patience_counter += 1

    def state(self) -> dict[str, Any]:
        return {
            "args": {
                "early_stopping_patience": self.early_stopping_patience,
                "early_stopping_threshold": self.early_stopping_threshold,
            },
            "attributes": {"early_stopping_patience_counter": self.early_stopping_patience_counter},
        }
