"""A trial's score from its evaluations: the best (or the last) one, for one objective or several.

The metrics and directions themselves come from the study file (`spec.study.metrics`, `spec.study.directions`)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def pick_evaluation(
    evaluations: Sequence[tuple[int, dict[str, float]]], metric: str, direction: str, objective: str
) -> tuple[int, dict[str, float]] | None:
    """The evaluation a trial is scored by: its best finite one for `metric` (or simply its last one)."""
    scored = [(step, m) for step, m in evaluations if metric in m]
    if not scored:
        return None
    if objective == "last":
        return scored[-1]
    finite = [(step, m) for step, m in scored if math.isfinite(m[metric])]
    if not finite:
        return scored[-1]
    better = max if direction == "maximize" else min
    # Ties go to the earliest evaluation: the cheapest checkpoint that reached the value.
    return better(
        finite, key=lambda e: (e[1][metric], -e[0]) if direction == "maximize" else (e[1][metric], e[0])
    )


def trial_values(
    evaluations: Sequence[tuple[int, dict[str, float]]],
    metrics: Sequence[str],
    directions: Sequence[str],
    objective: str,
) -> tuple[list[float] | None, int | None]:
    """The trial's objective values and the step they come from.

    With one objective the value is the best (or last) evaluation of that metric. With several, the evaluation chosen by
    the first objective gives every value, so the values describe one model (one checkpoint) rather than a mix."""
    chosen = pick_evaluation(evaluations, metrics[0], directions[0], objective)
    if chosen is None:
        return None, None
    step, chosen_metrics = chosen
    if any(m not in chosen_metrics for m in metrics):
        return None, step
    return [chosen_metrics[m] for m in metrics], step
