"""What the first Trainer in a process does once, done ahead in a parent that forks many short runs (a study's worker):
each forked child then starts with it done instead of repeating it (a few milliseconds of a 1-second trial).

Nothing here computes on a tensor, so no thread pool exists yet when the children are forked.
"""

from __future__ import annotations

import importlib
import io

import torch

from trainer.args import TrainingArguments, field_types


def prepare_for_fork() -> None:
    # The arguments' annotations, resolved to types for their checks (about 3 ms).
    field_types(TrainingArguments)
    # torch.save imports its serialization settings on its first call (each checkpoint's optimizer and RNG files).
    torch.save({}, io.BytesIO())
    # The DataLoader wraps every batch in record_function, whose first use imports the profiler's CUPTI monitor.
    with torch.autograd.profiler.record_function("hpo.warm_up"):
        pass
    # safetensors' save_file reaches numpy.ctypeslib, which numpy imports on first access.
    importlib.import_module("numpy.ctypeslib")
