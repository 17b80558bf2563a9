"""PBT's two decisions as pure functions: who exploits whom (the quantile rule) and how a copied member explores.

    bottom, top = quantiles({0: 0.91, 1: 0.52, 2: 0.88, 3: 0.60}, fraction=0.25, maximize=True)  # [1], [0]
    source = choose_source(1, scores, 0.25, True, rng)      # 0: member 1 continues from member 0's checkpoint
    params = explore(source_params, mutations, space, resample_probability=0.25, rng=rng)

Members are compared on their scores at the same step (the step they all stopped at), so a member that reached the
interval late is judged against the scores the others had there, not against scores taken later in their training.
Randomness comes from `decision_rng(seed, member, step)`, so a re-run of a decision (a worker that crashed after
deciding and before recording) makes the same one.
"""

from __future__ import annotations

import math
import random
from typing import Any

from hpo.spec.pbt import MutationSpec
from hpo.spec.search_space import ParamSpec


def quantiles(scores: dict[int, float], fraction: float, maximize: bool) -> tuple[list[int], list[int]]:
    """(bottom, top) members by score. Each holds ceil(n * fraction) members, at most n // 2, so they never overlap;
    a non-finite score ranks last. Ties are broken by member number, so the split is the same in every process."""
    if len(scores) < 2:
        return [], []

    def worse_first(member: int) -> tuple[float, int]:
        score = scores[member]
        if not math.isfinite(score):
            return (-math.inf, -member)
        return (score if maximize else -score, -member)

    ordered = sorted(scores, key=worse_first)  # worst ... best
    count = min(math.ceil(len(ordered) * fraction), len(ordered) // 2)
    return ordered[:count], ordered[len(ordered) - count :][::-1]


def choose_source(
    member: int, scores: dict[int, float], fraction: float, maximize: bool, rng: random.Random
) -> int | None:
    """The member `member` copies: one of the top quantile, drawn at random, when `member` is in the bottom one."""
    bottom, top = quantiles(scores, fraction, maximize)
    if member not in bottom or not top:
        return None
    return rng.choice(sorted(top))


def explore(
    params: dict[str, Any],
    mutations: dict[str, MutationSpec],
    space: dict[str, ParamSpec],
    resample_probability: float,
    rng: random.Random,
) -> dict[str, Any]:
    """New hyperparameters from the copied ones: each mutation is resampled from the search space (always for
    `resample: true`, with `resample_probability` for factors) or multiplied by one of its factors and kept within the
    search space's range. Parameters without a mutation are copied as they are."""
    new = dict(params)
    for name in sorted(mutations):
        mutation, param = mutations[name], space[name]
        if mutation.resample or rng.random() < resample_probability:
            new[name] = sample_value(param, rng)
        else:
            new[name] = perturb(param, params[name], rng.choice(mutation.factors or [1.0]))
    return new


def perturb(param: ParamSpec, value: Any, factor: float) -> Any:
    """`value * factor`, clamped to the parameter's range, on its step grid and whole for an int parameter."""
    low, high = float(param.low), float(param.high)
    moved = min(high, max(low, float(value) * factor))
    if param.step is not None:
        moved = low + round((moved - low) / float(param.step)) * float(param.step)
        moved = min(high, moved)
    if param.type == "int":
        return int(round(moved))
    return moved


def sample_value(param: ParamSpec, rng: random.Random) -> Any:
    """A value drawn from the parameter's distribution as the search space defines it (log scale, step, choices)."""
    values = param.possible_values()
    if values is not None:
        return rng.choice(values)
    grid = param.grid_values()
    if grid is not None and not param.log:
        return rng.choice(grid)
    low, high = float(param.low), float(param.high)
    drawn = math.exp(rng.uniform(math.log(low), math.log(high))) if param.log else rng.uniform(low, high)
    return int(round(drawn)) if param.type == "int" else drawn


def decision_rng(seed: int | None, member: int, step: int) -> random.Random:
    """The random stream of one member's decision at one step (a string seed hashes the same in every process)."""
    return random.Random(f"pbt:{seed}:{member}:{step}")
