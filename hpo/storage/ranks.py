"""Spearman's rank correlation, for the rules that judge a rung only as far as its values rank later ones: ASHA's
rank gate (hpo.scheduling.rank_gate) and the ranked share of stop-type rungs (hpo.storage.stop_rungs). It sits in the
storage layer because the stop-type pruner is built there."""

from __future__ import annotations

from collections.abc import Sequence


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
