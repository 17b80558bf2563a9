"""`hpo retrain`: the chosen trial's parameters (best, `--trial N`, or a Pareto pick by `--metric`) as one run file.

The run gets the study's training defaults, the trial's sampled values and any `--set` overrides, and is tracked in the
study's experiment store (kind "run"), so it appears beside the trials.
"""

from __future__ import annotations

from pathlib import Path

from optuna.trial import FrozenTrial

from hpo.spec import RunSpec, StudySpec, TrackingSpec
from hpo.storage.study_db import load_existing_study, pick_trial
from hpo.tracking.events import store_location


def retrain_spec(
    spec: StudySpec, out_dir: str | Path, *, trial_number: int | None = None, metric: str | None = None
) -> tuple[RunSpec, FrozenTrial]:
    """(RunSpec of the retraining, the chosen trial)."""
    study = load_existing_study(spec)
    trial = pick_trial(study, spec, trial_number, metric)
    training, model_params = spec.split_params(dict(trial.params))
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
    return run_spec, trial
