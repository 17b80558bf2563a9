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

from hpo.storage.ranks import ranks, spearman

__all__ = ["RankGate", "ranks", "spearman"]


@dataclass(frozen=True)
class RankGate:
    # Eight pairs: a rank correlation of 0.7 over 8 points is significant at about 5 % (one-sided), over 5 it is not.
    min_pairs: int = 8
    min_correlation: float = 0.7

    def is_open(self, pairs: Sequence[tuple[float, float]]) -> bool:
        """True when the rung may judge: enough (value at the rung, final score) pairs that rank alike."""
        return len(pairs) >= self.min_pairs and spearman(pairs) >= self.min_correlation
