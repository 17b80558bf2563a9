"""A rung that judges only once its values have been seen to rank the final ones: ASHA's rank gate.

A rung judges a configuration by its value part-way, which is worth the pauses only where that value ranks the final
one. Whether it does is a property of the problem that no default can know in advance: bench/search measured Spearman
correlations between a third of the length and the end of 0.95 (a CNN on digits), 0.74 (an MLP under a cosine
schedule) and 0.62 (LoRA on MiniLM), and a rung there cost the MLP and MiniLM their best configurations. So the study
measures it as it goes: every trial reports its value at the rung (paused there or not), and each trial that
completes adds a pair (value at the rung, final score). While fewer than `min_pairs` pairs exist, or their rank
correlation is below `min_correlation`, the gate is closed and a trial at the rung trains on as if promoted; once it
opens, the rung judges as ASHA does. The pure rule lives here; hpo.scheduling.promotion feeds it the pairs from the
study's database, and bench/search's simulator from its simulated trials.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class RankGate:
    # Eight pairs: a rank correlation of 0.7 over 8 points is significant at about 5 % (one-sided), over 5 it is not.
    min_pairs: int = 8
    min_correlation: float = 0.7

    def is_open(self, pairs: Sequence[tuple[float, float]]) -> bool:
        """True when the rung may judge: enough (value at the rung, final score) pairs that rank alike."""
        return len(pairs) >= self.min_pairs and spearman(pairs) >= self.min_correlation


def spearman(pairs: Sequence[tuple[float, float]]) -> float:
    """Spearman's rank correlation of the pairs, ties given their mean rank; 0.0 when either side is constant (no
    ranking to agree with). The direction of the metric does not matter: both sides share it."""
    if len(pairs) < 2:
        return 0.0
    left = ranks([a for a, _ in pairs])
    right = ranks([b for _, b in pairs])
    mean = (len(pairs) + 1) / 2
    covariance = sum((a - mean) * (b - mean) for a, b in zip(left, right, strict=True))
    spread_left = sum((a - mean) ** 2 for a in left)
    spread_right = sum((b - mean) ** 2 for b in right)
    if spread_left == 0 or spread_right == 0:
        return 0.0
    return covariance / (spread_left * spread_right) ** 0.5


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, equal values sharing the mean of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    result = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            result[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return result
