"""The rank layout a launcher put in the environment (torchrun, `accelerate launch`, the deepspeed launcher, MPI).

Apart from trainer.distributed, which imports torch: choosing a strategy ("auto") reads it when a study file is
checked, and `hpo status` should not pay torch's import for that.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

# Launchers that speak MPI instead of torchrun's variables (the deepspeed launcher with --launcher openmpi, mpirun).
_MPI_LAYOUT = {
    "RANK": "OMPI_COMM_WORLD_RANK",
    "WORLD_SIZE": "OMPI_COMM_WORLD_SIZE",
    "LOCAL_RANK": "OMPI_COMM_WORLD_LOCAL_RANK",
}


@dataclass(frozen=True)
class RankLayout:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1


def rank_layout() -> RankLayout:
    """The rank layout set by torchrun, `accelerate launch`, the deepspeed launcher or MPI; one process otherwise."""
    env = os.environ
    if "RANK" in env and "WORLD_SIZE" in env:
        return RankLayout(int(env["RANK"]), int(env.get("LOCAL_RANK", env["RANK"])), int(env["WORLD_SIZE"]))
    if _MPI_LAYOUT["RANK"] in env:
        return RankLayout(*(int(env.get(_MPI_LAYOUT[k], "0")) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE")))
    return RankLayout()
