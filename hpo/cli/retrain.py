"""`hpo retrain study.yaml --out DIR [--trial N] [--metric NAME] [--set ...]`: the best parameters, trained from scratch.

The chosen trial's parameters become one `hpo train` run (model_init params and training arguments), with the study's
training defaults and any `--set` overrides, e.g. `--set training.max_steps=2000` to train longer. It is tracked like any
run, in the study's experiment store (kind "run"), so it appears beside the trials.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from hpo.cli.app import summary
from hpo.cli.options import (
    metric_option,
    out_option,
    overwrite_option,
    resume_option,
    set_option,
    storage_option,
    trial_option,
)
from hpo.cli.train import print_summary, protect_earlier_run, train_from_spec
from hpo.errors import ConfigError
from hpo.spec import load_study_spec
from hpo.storage.lineage import Segment, changes
from hpo.study.retrain import replay_spec, retrain_spec
from hpo.trial.single_run import run_training
from trainer.hyperparams import HyperparameterSchedule


@click.command("retrain", short_help=summary("retrain"))
@click.argument("study_file", type=click.Path(dir_okay=False, path_type=Path))
@out_option("The run's output folder.")
@trial_option("Retrain")
@metric_option
@storage_option
@set_option
@overwrite_option
@resume_option
@click.option(
    "--replay",
    is_flag=True,
    help="PBT studies: train one run from scratch along the chosen member's hyperparameter schedule.",
)
def retrain(
    study_file: Path,
    output_dir: str,
    trial_number: int | None,
    metric: str | None,
    storage: str | None,
    overrides: tuple[str, ...],
    overwrite: bool,
    resume: str | None,
    replay: bool,
) -> None:
    """Train the best parameters again, from scratch.

    The best trial's parameters (or trial N's) are trained as a single run in the --out folder, tracked like
    `hpo train`. Ctrl-C saves a checkpoint at the next step and stops; --resume continues from it.

    \b
    Example:
      hpo retrain studies/digits_mlp.yaml --out runs/digits-best --set training.max_steps=2000"""
    if not study_file.is_file():
        raise ConfigError(f"{study_file}: no such study file")
    spec = load_study_spec(study_file, overrides=list(overrides), storage=storage)
    if replay:
        if resume is not None:
            raise ConfigError("--resume: --replay trains the schedule from scratch; give one of them")
        if metric is not None:
            raise ConfigError("--metric: a PBT study has one objective; remove --metric")
        run_spec, trial, steps = replay_spec(spec, output_dir, trial_number=trial_number)
        protect_earlier_run(run_spec.output_dir, overwrite, folder_option="--out", resumable=False)
        click.echo(
            f"replaying the schedule of trial {trial.number} of study {spec.study.name} in {output_dir}:"
        )
        for line in describe_schedule(steps):
            click.echo(f"  {line}")
        schedule = HyperparameterSchedule(changes(steps), spec.task.resolve().mutable)
        print_summary(run_training(run_spec, callbacks=[schedule]))
        return
    run_spec, trial = retrain_spec(spec, output_dir, trial_number=trial_number, metric=metric)
    if resume is None:
        protect_earlier_run(run_spec.output_dir, overwrite, folder_option="--out")
    click.echo(
        f"retraining trial {trial.number} of study {spec.study.name} ({_params(trial.params)}) in {output_dir}"
    )
    print_summary(train_from_spec(run_spec, resume))


def _params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items())


def describe_schedule(steps: list[Segment]) -> list[str]:
    lines = []
    for index, segment in enumerate(steps):
        shown = (
            segment.params
            if index == 0
            else {k: v for k, v in segment.params.items() if steps[index - 1].params.get(k) != v}
        )
        origin = f"member {segment.member}" + (
            f", copied from member {segment.source}" if segment.source is not None else ""
        )
        lines.append(f"from step {segment.step}: {_params(shown)} ({origin})")
    return lines
