"""One training run from a run file: the work behind `hpo train`, as a plain function other commands can call.

    summary = run_training(load_run_spec("studies/digits_mlp_run.yaml"), resume=True)

Builds the TrainingArguments, calls the task's `model_init(model_params)` and `data(model_params)`, trains with the
tracking callbacks, and writes `metrics.json` (final and best metrics, best checkpoint, wall time) in the output folder.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hpo.errors import ConfigError, HpoError, Interrupted
from hpo.spec import RunSpec, Task, metric_key
from hpo.storage import remote
from hpo.tracking.callbacks import build_tracking_callbacks, finish_tracking
from hpo.tracking.run_info import RunInfo
from hpo.trial.adapter import wrap_model
from hpo.trial.callbacks import InterruptCallback, reset_interrupt
from hpo.trial.upload import upload_callbacks
from trainer import ProgressCallback, Trainer, TrainerCallback, TrainOutput, set_seed
from trainer.checkpoint import latest_checkpoint

METRICS_FILE = "metrics.json"


class RunStopped(Interrupted):
    """A stop the user asked for; `checkpoint` is the newest complete one, the one `--resume` continues from."""

    def __init__(self, message: str, checkpoint: str | None) -> None:
        super().__init__(message)
        self.checkpoint = checkpoint


def run_training(
    spec: RunSpec,
    resume: bool | str | None = None,
    *,
    callbacks: Sequence[TrainerCallback] = (),
    stoppable: bool = False,
) -> dict[str, Any]:
    """Train the run described by `spec`; `resume` is True (newest complete checkpoint) or a checkpoint path.

    Returns the summary that is also written to `<output_dir>/metrics.json`. `stoppable`: a stop request
    (`hpo.trial.callbacks.on_interrupt`, a signal handler the caller installs) saves a checkpoint at the next step
    and raises RunStopped; a KeyboardInterrupt becomes RunStopped too, naming the newest checkpoint."""
    task = spec.resolve_task()
    args = spec.training_arguments()
    params = dict(spec.model)
    resume_from = resume_checkpoint(resume, args.output_dir)
    train_dataset, eval_dataset = refused_as_config_error(spec, "data", lambda: load_datasets(task, params))
    set_seed(args.seed)  # before model_init, so a run's initial weights depend only on its seed
    model = refused_as_config_error(spec, "model_init", lambda: task.model_init(params))
    if spec.peft is not None:
        model = wrap_model(model, spec.peft)  # the task's model under the file's adapter
    tracking = build_tracking_callbacks(
        spec, run=RunInfo(kind="run", name=spec.name or "run", params=params, output_dir=args.output_dir)
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        data_collator=task.collator,
        compute_metrics=task.compute_metrics,
        callbacks=[*tracking, *spec.build_callbacks(), *callbacks],  # the file's callbacks: new instances
    )
    for upload in upload_callbacks(
        args.output_dir
    ):  # each checkpoint to the object store (a URL output folder)
        trainer.add_callback(upload)
    interrupt = InterruptCallback()
    if stoppable:
        reset_interrupt()
        trainer.add_callback(interrupt)
    started = time.perf_counter()
    try:
        output = trainer.train(resume_from_checkpoint=resume_from)
        if interrupt.stopped_at is not None:
            finish_tracking(tracking, status="interrupted")
            saved = latest_checkpoint(args.output_dir)
            raise RunStopped(f"stopped at step {interrupt.stopped_at}: saved {saved}", str(saved))
        final = final_metrics(trainer, eval_dataset)
    except KeyboardInterrupt:
        close_progress_bars(trainer)  # else the bar is redrawn after the message, at exit
        finish_tracking(tracking, status="interrupted")
        newest = latest_checkpoint(args.output_dir)
        if newest is None:
            raise RunStopped("stopped at once: nothing was saved (no checkpoint yet)", None) from None
        step = newest.name.rsplit("-", 1)[-1]
        raise RunStopped(
            f"stopped at once: the newest checkpoint is {newest} (step {step})", str(newest)
        ) from None
    except RunStopped:
        raise
    except BaseException as error:
        finish_tracking(tracking, status="failed", error=f"{type(error).__name__}: {error}")
        raise
    summary = build_summary(spec, trainer, output, final, time.perf_counter() - started, resume_from)
    finish_tracking(tracking, status="completed", best_step=summary["best"].get("step"))
    if trainer.state.is_world_process_zero:
        write_json_atomically(Path(args.output_dir) / METRICS_FILE, summary)
    return summary


def close_progress_bars(trainer: Trainer) -> None:
    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, ProgressCallback) and callback.bar is not None:
            callback.bar.close()
            callback.bar = None


def refused_as_config_error(spec: RunSpec, function: str, call: Any) -> Any:
    """A task that refuses the file's `model:` parameters (ValueError/TypeError/KeyError) is a bad file (exit 2), as
    `hpo validate` says; the traceback stays available through `hpo --debug`."""
    try:
        return call()
    except (ValueError, TypeError, KeyError) as error:
        raise ConfigError(
            f"{spec.source}: model: task.{function} refused the parameters {dict(spec.model)}: "
            f"{type(error).__name__}: {error} (fix the model: section; hpo --debug shows where it failed)"
        ) from error


def resume_checkpoint(resume: bool | str | None, output_dir: str) -> str | None:
    """The checkpoint to resume from: the newest complete one in output_dir for True, the given folder for a path."""
    if resume is None or resume is False:
        return None
    if resume is True:
        # With a URL output folder: the newest complete one in the object store, fetched here.
        latest, _ = remote.fetch(remote.latest(output_dir, output_dir), output_dir)
        if latest is None:
            raise ConfigError(
                f"--resume: no complete checkpoint in {output_dir}; run without --resume to start afresh"
            )
        return str(latest)
    path = Path(resume)
    if not path.is_dir():
        raise ConfigError(f"--resume: {path} is not a checkpoint folder (expected .../checkpoint-<step>/)")
    return str(path)


def load_datasets(task: Task, params: dict[str, Any]) -> tuple[Any, Any]:
    result = task.data(params)
    if not isinstance(result, tuple | list) or len(result) != 2:
        raise HpoError(
            f"task.data returned {type(result).__name__}; it must return (train_dataset, eval_dataset), "
            "with eval_dataset None when there is none"
        )
    return result[0], result[1]


def final_metrics(trainer: Trainer, eval_dataset: Any) -> dict[str, float]:
    """The evaluation at the last step: the one the loop logged there, or a fresh one when the loop did not evaluate."""
    if eval_dataset is None:
        return {}
    last = evaluations(trainer.state.log_history)
    if last and last[-1].get("step") == trainer.state.global_step and not trainer.args.load_best_model_at_end:
        return {k: v for k, v in last[-1].items() if k.startswith("eval_")}
    return {k: v for k, v in trainer.evaluate().items() if k.startswith("eval_")}


def evaluations(log_history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [entry for entry in log_history if any(k.startswith("eval_") for k in entry)]


def best_evaluation(trainer: Trainer) -> dict[str, Any]:
    """The best evaluation by metric_for_best_model (eval_loss when unset): its metric, value, step and checkpoint."""
    state, args = trainer.state, trainer.args
    metric = metric_key(args.metric_for_best_model or "loss")
    greater = args.greater_is_better if args.metric_for_best_model else False
    scored = [e for e in evaluations(state.log_history) if _finite(e.get(metric))]
    if state.best_global_step is not None:
        chosen = next((e for e in scored if e.get("step") == state.best_global_step), None)
    else:
        chosen = (max if greater else min)(scored, key=lambda e: e[metric]) if scored else None
    if chosen is None:
        return {"metric": metric}
    checkpoint = state.best_model_checkpoint or _checkpoint_at(args.output_dir, chosen["step"])
    return {
        "metric": metric,
        "value": chosen[metric],
        "step": chosen["step"],
        "checkpoint": checkpoint,
        "metrics": {k: v for k, v in chosen.items() if k.startswith("eval_")},
    }


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _checkpoint_at(output_dir: str, step: int) -> str | None:
    folder = Path(output_dir) / f"checkpoint-{step}"
    return str(folder) if folder.is_dir() else None


def build_summary(
    spec: RunSpec,
    trainer: Trainer,
    output: TrainOutput,
    final: dict[str, float],
    wall_time: float,
    resumed_from: str | None,
) -> dict[str, Any]:
    return {
        "name": spec.name,
        "output_dir": trainer.args.output_dir,
        "global_step": trainer.state.global_step,
        "epoch": trainer.state.epoch,
        "training_loss": output.training_loss,
        "train": dict(output.metrics),
        "final": final,
        "best": best_evaluation(trainer),
        "resumed_from": resumed_from,
        "wall_time_s": round(wall_time, 3),
    }


def write_json_atomically(path: Path, data: dict[str, Any]) -> None:
    """Write to a temporary file and rename it into place: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    os.replace(temporary, path)
