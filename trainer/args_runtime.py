"""What transformers' `TrainingArguments` tells a script about the process it runs in: rank, device, logging level.

Example scripts read these before the Trainer exists (`training_args.should_log`, `get_process_log_level()`,
`main_process_first(...)`, `device`, `n_gpu`, `parallel_mode`); they come from the launcher's environment (RANK,
LOCAL_RANK, WORLD_SIZE), as transformers reads them through accelerate's PartialState.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# transformers' levels, with "passive": leave the level as the application set it
LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "passive": -1,
}


class ParallelMode(Enum):
    NOT_PARALLEL = "not_parallel"
    NOT_DISTRIBUTED = "not_distributed"
    DISTRIBUTED = "distributed"


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else default


class ProcessProperties:
    """Mixed into TrainingArguments: the process facts transformers' TrainingArguments exposes."""

    local_rank: int
    use_cpu: bool
    log_level: str
    log_level_replica: str
    log_on_each_node: bool
    save_on_each_node: bool

    @property
    def world_size(self) -> int:
        return _env_int("WORLD_SIZE", 1)

    @property
    def process_index(self) -> int:
        return _env_int("RANK", 0)

    @property
    def local_process_index(self) -> int:
        rank = _env_int("LOCAL_RANK", -1)
        return rank if rank >= 0 else max(self.local_rank, 0)

    @property
    def parallel_mode(self) -> ParallelMode:
        return ParallelMode.DISTRIBUTED if self.world_size > 1 else ParallelMode.NOT_DISTRIBUTED

    @property
    def device(self) -> torch.device:
        import torch  # here, not at the top: TrainingArguments (a study file's check) imports without torch

        if self.use_cpu or not torch.cuda.is_available():
            return torch.device("cpu")
        return torch.device("cuda", self.local_process_index % max(torch.cuda.device_count(), 1))

    @property
    def n_gpu(self) -> int:
        """GPUs this process uses: one per process (no DataParallel), none on the CPU."""
        return 1 if self.device.type == "cuda" else 0

    @property
    def should_log(self) -> bool:
        """Whether this process logs: the main process, or each node's first with log_on_each_node."""
        return self.local_process_index == 0 if self.log_on_each_node else self.process_index == 0

    @property
    def should_save(self) -> bool:
        return self.local_process_index == 0 if self.save_on_each_node else self.process_index == 0

    def get_process_log_level(self) -> int:
        """log_level on the processes that log, log_level_replica on the others; "passive" keeps the current level
        of the `trainer` logger."""
        current = logging.getLogger("trainer").getEffectiveLevel()
        level = LOG_LEVELS[self.log_level if self.should_log else self.log_level_replica]
        return current if level == -1 else level

    @contextlib.contextmanager
    def main_process_first(self, local: bool = True, desc: str = "work") -> Iterator[None]:
        """Run the block on the main process first, then on the others (a dataset map the others read from cache)."""
        import torch  # here, not at the top: as in `device`

        distributed = (
            self.world_size > 1 and torch.distributed.is_available() and torch.distributed.is_initialized()
        )
        is_main = (self.local_process_index if local else self.process_index) == 0
        if distributed and not is_main:
            torch.distributed.barrier()
        try:
            yield
        finally:
            if distributed and is_main:
                torch.distributed.barrier()
