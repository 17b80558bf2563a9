"""`hpo validate file.yaml [--storage URL] [--set key=value ...]`: check a run or study file without training.

Checks the schema (names, types, ranges), imports every `module:function` of the task, builds the training arguments,
sampler and pruner, and (unless --no-dry-run) evaluates the untrained model on a few eval samples to prove that the
objective metrics exist.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import click

from hpo.cli.app import summary
from hpo.cli.options import dry_run_option, set_option, storage_option
from hpo.errors import ConfigError
from hpo.spec import Spec, StudySpec, load_spec
from hpo.spec.scheduler import RANKED
from hpo.trial.dry_run import dry_run as run_dry_run


@click.command("validate", short_help=summary("validate"))
@click.argument("spec_file", type=click.Path(dir_okay=False))
@storage_option
@set_option
@dry_run_option
def validate(spec_file: str, storage: str | None, overrides: tuple[str, ...], dry_run: bool) -> None:
    """Check a run or study file without training.

    Checks SPEC_FILE (a run file or a study file) and reports what it would do.

    \b
    Example:
      hpo validate studies/digits_mlp.yaml --set study.n_trials=5"""
    if not Path(spec_file).is_file():
        raise ConfigError(f"{spec_file}: no such run or study file")
    spec = load_spec(spec_file, overrides=list(overrides), storage=storage)
    if storage is not None and not isinstance(spec, StudySpec):
        raise ConfigError(f"--storage: {spec_file} is a run file; --storage applies to study files")
    spec.resolve_task()
    metrics = run_dry_run(spec) if dry_run else None
    click.echo(describe(spec, metrics))


def describe(spec: Spec, metrics: dict[str, float] | None) -> str:
    lines = []
    if isinstance(spec, StudySpec):
        study = spec.study
        objectives = ", ".join(
            f"{d} {m}" for m, d in zip(study.metrics or [], study.directions or [], strict=True)
        )
        lines += [
            f"{spec.source}: valid study file '{spec.name}'",
            f"  objectives: {objectives} ({study.objective} evaluation of each trial)",
            f"  search space: {len(spec.search_space)} parameters ({', '.join(spec.search_space) or 'none'})",
            f"  sampler: {study.sampler.type}; pruner: {spec.pruning_label()}; "
            f"trials: {study.n_trials or 'until timeout'}",
            *([describe_scheduler(spec)] if study.scheduler is not None else []),
            f"  storage: {spec.storage}",
            f"  output: {spec.output_dir}",
        ]
    else:
        lines += [f"{spec.source}: valid run file '{spec.name}'", f"  output: {spec.output_dir}"]
    if spec.peft is not None:
        searched = [n for n, p in getattr(spec, "search_space", {}).items() if p.target == "peft"]
        lines.append(
            f"  adapter: peft {spec.peft['method']}"
            + (f"; searched: {', '.join(searched)}" if searched else "")
        )
    if metrics is not None:
        names = sorted(k for k in metrics if k.startswith("eval_"))
        lines.append(f"  evaluation produces: {', '.join(names) or 'nothing (no eval dataset)'}")
    return "\n".join(lines)


def describe_scheduler(spec: StudySpec) -> str:
    pbt = spec.study.scheduler
    assert pbt is not None
    if pbt.type == "asha" and pbt.mode == "stop":
        assert pbt.reduction_factor is not None and pbt.keep is not None  # settled
        fraction = pbt.first_fraction()
        first = (
            f"{Fraction(fraction).limit_denominator(1000)} of each trial's length (its first evaluation there)"
            if fraction
            else "each trial's first evaluation"
        )
        return (
            f"  scheduler: asha, mode stop: rungs from {first}, each {pbt.reduction_factor} times as far; a trial "
            f"outside the best {kept_share(pbt.keep)} at a rung stops"
            + (f" once {pbt.startup_trials} trials have completed" if pbt.startup_trials else "")
            + f"; length {pbt.max_resource} {pbt.resource}"
        )
    if pbt.type != "pbt":
        options = ", ".join(f"{k} {v}" for k, v in pbt.model_dump(exclude={"type"}).items())
        return f"  scheduler: {pbt.type}, {options}"
    mutations = ", ".join(
        f"{name} ({'resample' if m.resample else 'x' + '/'.join(f'{f:g}' for f in m.factors or [])})"
        for name, m in pbt.mutations.items()
    )
    return (
        f"  scheduler: pbt, population {pbt.population}, exploit/explore every {pbt.perturbation_interval} steps up "
        f"to {pbt.max_resource} (bottom {pbt.quantile_fraction:g} copies top {pbt.quantile_fraction:g}); "
        f"mutating {mutations}"
    )


def kept_share(keep: float | str) -> str:
    """The share a stop-type rung keeps, in words: a fraction, or the ranked rule's three shares."""
    if keep == RANKED:
        return "share (a third where the rung's values rank those 4 times further on, all where they do not)"
    return str(Fraction(keep).limit_denominator(100))
