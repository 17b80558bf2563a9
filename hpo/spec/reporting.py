"""`training.report_to` in run and study files: the Trainer's own trackers, checked against the `tracking:` section.

A run file may name them (`hpo train` then reports as a transformers script does); a named tracker whose package is
missing is refused while the file is read, with the pip command. A study file turns trackers on under `tracking:`
instead, which makes one run per trial with its parameters and objective (and continues it when the trial is retried
or resumed), so `training.report_to` there is refused with that pointer.
"""

from __future__ import annotations

from typing import Any

from hpo.spec.errors import FieldProblem
from hpo.spec.sections import TrackingSpec
from trainer.report_to import missing_package

FIELD = "training.report_to"


def check_run_report_to(args: Any, tracking: TrackingSpec) -> None:
    """A run file's report_to: every package installed, and no tracker both there and under tracking:."""
    for name in args.report_to:
        missing = missing_package(name)
        if missing is not None:
            raise FieldProblem(FIELD, f"names {name!r} but {missing}; or remove it")
    both = [name for name in args.report_to if name in tracking.integrations()]
    if both:
        raise FieldProblem(
            FIELD,
            f"names {both} and tracking: sets them too (two runs for one training); keep one of the two",
        )


def check_study_report_to(args: Any) -> None:
    if args.report_to:
        switches = ", ".join(f"tracking.{name}: true" for name in args.report_to)
        raise FieldProblem(
            FIELD,
            f"{args.report_to} would report every trial as a separate script; in a study set {switches} instead "
            "(one run per trial with its parameters and objective)",
        )
