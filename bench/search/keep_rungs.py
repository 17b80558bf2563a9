"""Stop-type rungs from the first evaluation that keep more than they stop: a candidate for issue 36 (round 6).

Why: a rung loses a search its good model when a configuration that ends in the top 5 % sits low at the rung. Over
each dense recording (300 configurations), the share of the q95 configurations in the bottom half and in the bottom
third of all configurations, at the first evaluation and at a ninth of the length:

| problem | first evaluation: bottom half; third | a ninth: bottom half; third |
| --- | --- | --- |
| digits | 14 %; 0 % | 33 %; 10 % |
| moons | 11 %; 6 % | 39 %; 28 % |
| fresh-diabetes | 40 %; 20 % | 47 %; 27 % |
| friedman, synth-optim, the CNNs, charlm | 0 %; 0 % | 0 %; 0 % |

So the shipped cut (half stopped at a ninth) stops a third of digits' best configurations, where a cut of the bottom
third at the first evaluation stops none; and where early values rank (friedman), a rung at the first evaluation stops
the poor configurations sooner. The rule: rungs at each trial's first evaluation, then `spacing` times further in
global steps; at a rung a trial goes on if its value is among the best max(1, floor(n * keep)) of the n trials (itself
included) with a value at that fraction of their length, as Optuna's successive halving judges a rung, with the share
kept apart from the rungs' spacing (successive halving ties them: keep 1 / eta, spacing eta).

Result (docs/search-rounds.md, "Round 6"): not ahead of the shipped rungs at 100 seeds (worst ratio 1.59-1.68 against
1.53, friedman); at 400 seeds on all 17, keep 2/3 x2's worst time-to-q95 ratio is 1.25x (moons) against the
shipped 1.48x (fresh-diabetes): it trades digits and fresh-diabetes for moons. Round 7 judged the rule at 400 seeds
with these three and the schedule then shipped in its pool, and keep 3/4 x2 shipped from then until round 9
(hpo.storage.stop_rungs with `keep: 0.75`, its own implementation; this one stays as the check that hpo's runs equal
the candidate's seed for seed).
"""

from __future__ import annotations

import math

import optuna
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial

from bench.search.adaptive_rungs import AdaptiveRungsPruner, within_best


class KeepRungsPruner(AdaptiveRungsPruner):
    """AdaptiveRungsPruner's rung loop with the first rung fixed at the first evaluation and its own share kept."""

    def __init__(self, keep: float = 2 / 3, spacing: int = 2) -> None:
        if not 0 < keep < 1:
            raise ValueError(f"keep must be in (0, 1), got {keep}")
        super().__init__(reduction_factor=spacing)
        self.keep = keep

    def schedule(self, study: optuna.Study, trials: list[FrozenTrial]) -> tuple[float, int]:
        return 0.0, self.reduction_factor  # the first report, then `spacing` times further

    def goes_on(
        self, value: float, others: list[float], reduction_factor: int, direction: StudyDirection
    ) -> bool:
        return within_best(value, others, lambda n: max(1, math.floor(n * self.keep + 1e-9)), direction)
