"""`hpo retrain study.yaml --out DIR [--trial N] [--metric NAME] [--set ...]`: the best parameters, trained from scratch.

The chosen trial's parameters become one `hpo train` run (model_init params and training arguments), with the study's
training defaults and any `--set` overrides, e.g. `--set training.max_steps=2000` to train longer. It is tracked like any
run, in the study's experiment store (kind "run"), so it appears beside the trials.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from hpo.errors import ConfigError


@click.command(short_help="Train the best parameters again, from scratch.")
@click.argument("study_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--out", "out_dir", required=True, type=click.Path(file_okay=False), help="The run's output folder."
)
@click.option(
    "--trial", "trial_number", type=int, default=None, help="Retrain this trial instead of the best one."
)
@click.option(
    "--metric", default=None, help="With several objectives: the one that picks from the Pareto front."
)
@click.option("--storage", metavar="URL", help="Optuna storage URL instead of the study file's.")
@click.option(
    "--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a field of the study file."
)
@click.option(
    "--overwrite", is_flag=True, help="Start afresh in an OUT that holds checkpoints (deletes them)."
)
def retrain(
    study_file: Path,
    out_dir: str,
    trial_number: int | None,
    metric: str | None,
    storage: str | None,
    overrides: tuple[str, ...],
    overwrite: bool,
) -> None:
    """Train the best trial's parameters from scratch as a single run in OUT."""
    from hpo.commands.train import print_summary, protect_earlier_run
    from hpo.run import run_training
    from hpo.spec import load_study_spec

    if not study_file.is_file():
        raise ConfigError(f"{study_file}: no such study file")
    spec = load_study_spec(study_file, overrides=list(overrides), storage=storage)
    run_spec, trial = retrain_spec(spec, out_dir, trial_number=trial_number, metric=metric)
    protect_earlier_run(run_spec.output_dir, overwrite, folder_option="--out", resumable=False)
    click.echo(
        f"retraining trial {trial.number} of study {spec.study.name} ({_params(trial.params)}) in {out_dir}"
    )
    print_summary(run_training(run_spec))


def retrain_spec(
    spec: Any, out_dir: str | Path, *, trial_number: int | None = None, metric: str | None = None
):
    """(RunSpec of the retraining, the chosen FrozenTrial)."""
    from hpo.export_select import pick_trial
    from hpo.objectives import study_directions, study_metrics
    from hpo.spec import RunSpec, TrackingSpec
    from hpo.study import load_existing_study
    from hpo.tracking.events import store_location

    study = load_existing_study(spec)
    metrics, directions = study_metrics(spec.study), study_directions(spec.study)
    trial = pick_trial(study, metrics, directions, trial_number, metric or spec.export.metric)
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
    )
    run_spec._source = spec.source  # noqa: SLF001 - errors name the study file
    return run_spec, trial


def _params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items())
