"""Which checkpoint an export ships: the best trial's best checkpoint (a Pareto-front pick by metric for several
objectives, or a trial named by number), or the best checkpoint of a single `hpo train` run."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpo.errors import ConfigError, HpoError
from hpo.spec import RunSpec, Spec, StudySpec, metric_key
from hpo.storage import remote
from hpo.storage.lineage import as_records, latest_by_member, member_of, schedule
from hpo.storage.study_db import load_existing_study, pick_trial
from hpo.tracking.events import store_location
from hpo.tracking.store import open_store, trial_run_id
from trainer.checkpoint_names import list_checkpoints


@dataclass
class ExportSource:
    spec: Spec
    kind: str  # "trial" | "run"
    checkpoint: Path
    step: int | None
    params: dict[str, Any]
    model_params: dict[str, Any]
    training: dict[str, Any]
    arguments: dict[str, Any]
    recorded_metrics: dict[str, float]
    metrics: list[str] = field(default_factory=list)  # the objectives' metric names
    values: list[float] | None = None
    study_name: str | None = None
    trial_number: int | None = None
    run_id: str | None = None
    study_summary: dict[str, Any] = field(default_factory=dict)
    peft_params: dict[str, Any] = field(
        default_factory=dict
    )  # the trial's sampled adapter options (peft: files)
    schedule: list[dict[str, Any]] | None = (
        None  # PBT: the member's hyperparameters by step (storage.lineage)
    )


# ---- a study ----------------------------------------------------------------------------------------------------
def study_source(
    spec: StudySpec, *, trial_number: int | None = None, metric: str | None = None
) -> ExportSource:
    study = load_existing_study(spec)
    return trial_source(spec, study, pick_trial(study, spec, trial_number, metric))


def trial_source(spec: StudySpec, study: optuna.Study, trial: FrozenTrial) -> ExportSource:
    metrics = list(spec.study.metrics or [])
    checkpoint = trial_checkpoint(trial, spec.output_dir)
    params, steps = dict(trial.params), None
    if spec.study.scheduler is not None and spec.study.scheduler.type == "pbt":
        # The weights were trained along a schedule; the member's latest values build the model they load into.
        trials = study.get_trials(deepcopy=False)
        steps = as_records(
            schedule(latest_by_member(trials), member_of(trial, {t.number: t for t in trials}))
        )
        params = dict(steps[-1]["params"])
    training, model_params = spec.split_params(params)
    return ExportSource(
        spec=spec,
        kind="trial",
        checkpoint=checkpoint,
        step=checkpoint_step(checkpoint),
        params=params,
        model_params=model_params,
        training=training,
        arguments=checkpoint_arguments(
            checkpoint, lambda: spec.training_arguments(trial_dir(trial), **training)
        ),
        recorded_metrics=recorded_metrics(checkpoint) or _values_as_metrics(metrics, trial.values),
        metrics=metrics,
        values=list(trial.values) if trial.values else None,
        study_name=study.study_name,
        trial_number=trial.number,
        run_id=trial_run_id(study.study_name, trial.number),
        study_summary=summarize_study(study, spec, trial.number),
        peft_params=spec.peft_params(dict(trial.params)),
        schedule=steps,
    )


def top_sources(spec: StudySpec, k: int, metric: str | None = None) -> list[ExportSource]:
    """The k best completed trials (by the objective, or by `metric` of several), best first."""
    study = load_existing_study(spec)
    metrics, directions = list(spec.study.metrics or []), list(spec.study.directions or [])
    key = metric_key(metric or spec.export.metric or metrics[0]) if len(metrics) > 1 else metrics[0]
    if key not in metrics:
        raise ConfigError(
            f"--metric {metric}: not an objective of the study; choose one of {', '.join(metrics)}"
        )
    index = metrics.index(key)
    done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if t.values]
    if not done:
        raise HpoError(f"study '{study.study_name}' has no completed trial to export; run `hpo run` first")
    done.sort(key=lambda t: t.values[index], reverse=directions[index] == "maximize")
    return [trial_source(spec, study, trial) for trial in done[:k]]


def trial_dir(trial: FrozenTrial) -> str:
    return str(trial.user_attrs.get("run_dir") or "")


def trial_checkpoint(trial: FrozenTrial, output_dir: str | None = None) -> Path:
    """The trial's best checkpoint, else its newest complete checkpoint. With a URL output folder (`output_dir`, the
    mirror: hpo.storage.remote) either is fetched from the object store when this machine has no current copy."""
    best = trial.user_attrs.get("best_checkpoint")
    run_dir = trial.user_attrs.get("run_dir")
    if output_dir is not None:
        fetched, _ = remote.fetch(best, output_dir)
        if fetched is not None:
            return fetched
        fetched, _ = remote.fetch(run_dir and remote.latest(run_dir, output_dir), output_dir)
        if fetched is not None:
            return measured_model(trial, fetched)
    elif best and Path(best).is_dir():
        return Path(best)
    saved = list_checkpoints(run_dir) if output_dir is None and run_dir and Path(run_dir).is_dir() else []
    if saved:
        return measured_model(trial, saved[-1])
    raise HpoError(
        f"trial {trial.number} ({trial.state.name}) has no checkpoint left in {run_dir or 'its run folder'}: "
        "its checkpoints were not saved (training.save_strategy) or were deleted (study.keep_checkpoints)"
    )


def measured_model(trial: FrozenTrial, newest: Path) -> Path:
    """`newest`, the trial's newest checkpoint when its best one is gone, if it holds the model the trial's value was
    measured on (saved at its best step); else a refusal: shipping it would label another model with that value
    (found by tests/chaos: a damaged disk deleted a retried trial's best checkpoint, and export shipped its last)."""
    best_step = trial.user_attrs.get("best_step")
    step = checkpoint_step(newest)
    if trial.state != TrialState.COMPLETE or best_step is None or step is None or step == best_step:
        return newest
    resumed = trial.user_attrs.get("resume_from")
    folders = [trial_dir(trial)] + ([str(Path(resumed).parent)] if resumed else [])
    value = ", ".join(f"{v:g}" for v in trial.values or [])
    raise HpoError(
        f"trial {trial.number}'s value {value} was measured at step {best_step}, and no checkpoint of that step "
        f"is left in {' or '.join(folders)} (deleted, or not saved there: training.save_steps); its newest, "
        f"{Path(newest).name}, holds another model: export another trial with --trial N"
    )


def summarize_study(study: optuna.Study, spec: StudySpec, chosen: int) -> dict[str, Any]:

    trials = study.get_trials(deepcopy=False)
    counts: dict[str, int] = {}
    for trial in trials:
        counts[trial.state.name] = counts.get(trial.state.name, 0) + 1
    return {
        "study_name": study.study_name,
        "n_trials": len(trials),
        "states": counts,
        "metrics": list(spec.study.metrics or []),
        "directions": list(spec.study.directions or []),
        # The file's choices: a study loaded for reading carries Optuna's defaults, not the ones it ran with.
        "sampler": str(spec.study.sampler.type),
        "pruner": spec.pruning_label(),
        "chosen_trial": chosen,
    }


# ---- a single run -----------------------------------------------------------------------------------------------
def run_source(spec: RunSpec) -> ExportSource:
    output_dir = Path(spec.output_dir or Path("runs") / (spec.name or "run"))
    if (
        remote.store_of(output_dir) is not None
    ):  # a URL output folder: the newest checkpoint in the store, here
        remote.fetch(remote.latest(output_dir, output_dir), output_dir)
    saved = list_checkpoints(output_dir) if output_dir.is_dir() else []
    if saved:
        best = _best_of_run(saved[-1], output_dir)
        checkpoint = best if best is not None else saved[-1]
    elif (output_dir / "model.safetensors").is_file() or (output_dir / "adapter_model.safetensors").is_file():
        checkpoint = output_dir
    else:
        raise HpoError(
            f"{output_dir} holds no checkpoint and no model.safetensors; run `hpo train` on the file first"
        )
    model_params = dict(spec.model)
    return ExportSource(
        spec=spec,
        kind="run",
        checkpoint=checkpoint,
        step=checkpoint_step(checkpoint),
        params=model_params,
        model_params=model_params,
        training=dict(spec.training),
        arguments=checkpoint_arguments(
            checkpoint, lambda: spec.training_arguments(output_dir=str(output_dir))
        ),
        recorded_metrics=recorded_metrics(checkpoint),
        metrics=_run_metric(checkpoint),
        run_id=_latest_run_id(spec, output_dir),
    )


def _best_of_run(latest: Path, output_dir: Path) -> Path | None:
    """The run's best checkpoint (fetched from the object store behind a URL output folder), when it is kept."""
    state = _trainer_state(latest)
    best, _ = remote.fetch(state.get("best_model_checkpoint"), output_dir)
    return best


def _run_metric(checkpoint: Path) -> list[str]:
    arguments = checkpoint_arguments(checkpoint, dict)
    name = arguments.get("metric_for_best_model")
    return [name if str(name).startswith("eval_") else f"eval_{name}"] if name else ["eval_loss"]


def _latest_run_id(spec: RunSpec, output_dir: Path) -> str | None:
    location = store_location(spec)
    if location is None or not (Path(location).exists() or "://" in location):
        return None
    try:
        with open_store(location) as store:
            runs = [
                r
                for r in store.runs(kind="run")
                if Path(r["output_dir"] or "").resolve() == output_dir.resolve()
            ]
    except Exception:
        return None
    return runs[-1]["id"] if runs else None


# ---- what a checkpoint says about itself ----------------------------------------------------------------------
def checkpoint_step(checkpoint: Path) -> int | None:
    name = Path(checkpoint).name
    if name.startswith("checkpoint-") and name[len("checkpoint-") :].isdigit():
        return int(name[len("checkpoint-") :])
    return _trainer_state(checkpoint).get("global_step")


def _trainer_state(checkpoint: Path) -> dict[str, Any]:
    return _checkpoint_json(Path(checkpoint) / "trainer_state.json") or {}


def _checkpoint_json(path: Path) -> Any:
    """A checkpoint's JSON file, or None when absent; a damaged one (cut short after it was written) named in one line."""
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise HpoError(
            f"{path}: not readable JSON ({error}): it was cut short or damaged after it was written; export another "
            "trial (--trial N), or train this one again (hpo retrain)"
        ) from None


def recorded_metrics(checkpoint: Path) -> dict[str, float]:
    """The evaluation logged at the checkpoint's step (from its trainer_state.json), e.g. {"eval_accuracy": 0.97}."""
    state = _trainer_state(checkpoint)
    step = checkpoint_step(checkpoint)
    found: dict[str, float] = {}
    for record in state.get("log_history", []):
        if record.get("step") == step:
            found.update(
                {
                    k: float(v)
                    for k, v in record.items()
                    if k.startswith("eval_") and isinstance(v, int | float)
                }
            )
    return found


def checkpoint_arguments(checkpoint: Path, fallback: Any) -> dict[str, Any]:
    found = _checkpoint_json(Path(checkpoint) / "training_args.json")
    if found is not None:
        return found
    value = fallback()
    return value.to_dict() if hasattr(value, "to_dict") else dict(value)


def _values_as_metrics(metrics: list[str], values: list[float] | None) -> dict[str, float]:
    return dict(zip(metrics, values, strict=False)) if values else {}
