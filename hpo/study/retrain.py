"""`hpo retrain`: the chosen trial's parameters (best, `--trial N`, or a Pareto pick by `--metric`) as one run file.

The run gets the study's training defaults, the trial's sampled values and any `--set` overrides, and is tracked in the
study's experiment store (kind "run"), so it appears beside the trials.
"""

from __future__ import annotations

from pathlib import Path

from optuna.trial import FrozenTrial

from hpo.errors import ConfigError
from hpo.spec import RunSpec, StudySpec, TrackingSpec
from hpo.storage.lineage import Segment, latest_by_member, member_of, schedule
from hpo.storage.study_db import load_existing_study, pick_trial
from hpo.tracking.events import store_location


def retrain_spec(
    spec: StudySpec, out_dir: str | Path, *, trial_number: int | None = None, metric: str | None = None
) -> tuple[RunSpec, FrozenTrial]:
    """(RunSpec of the retraining, the chosen trial)."""
    study = load_existing_study(spec)
    trial = pick_trial(study, spec, trial_number, metric)
    return _run_spec(spec, out_dir, trial, dict(trial.params)), trial


def replay_spec(
    spec: StudySpec, out_dir: str | Path, *, trial_number: int | None = None
) -> tuple[RunSpec, FrozenTrial, list[Segment]]:
    """PBT replay: (RunSpec starting from the hyperparameters the chosen member's weights started with, the member's
    trial, its schedule). The run applies the schedule's changes at their steps (trainer.hyperparams)."""
    if spec.study.scheduler is None or spec.study.scheduler.type != "pbt":
        raise ConfigError(
            f"--replay: study '{spec.study.name}' is not population-based training (study.scheduler.type: pbt); "
            "retrain without --replay"
        )
    study = load_existing_study(spec)
    trial = pick_trial(study, spec, trial_number)
    trials = study.get_trials(deepcopy=False)
    member = member_of(trial, {t.number: t for t in trials})
    steps = schedule(latest_by_member(trials), member)
    run_spec = _run_spec(spec, out_dir, trial, dict(steps[0].params))
    run_spec.name = f"{spec.study.name}-replay-member-{member}"
    return run_spec, trial, steps


def _run_spec(spec: StudySpec, out_dir: str | Path, trial: FrozenTrial, params: dict) -> RunSpec:
    training, model_params = spec.split_params(params)
    store = store_location(spec)
    tracking = TrackingSpec(store=store if store is not None else False, wandb=spec.tracking.wandb)
    run_spec = RunSpec(
        name=f"{spec.study.name}-retrain-trial-{trial.number}",
        output_dir=str(Path(out_dir).resolve()),
        task=spec.task,
        model=model_params,
        training={**spec.training, **training},
        tracking=tracking,
        export=spec.export,
        # an adapter study retrains the trial's adapter: the file's peft: section with the trial's sampled options
        peft={**spec.peft, **spec.peft_params(dict(trial.params))} if spec.peft is not None else None,
    )
    run_spec._source = spec.source  # noqa: SLF001 - errors name the study file
    return run_spec
