"""`remove_unused_columns`: what a data set holds that the model's forward does not take is dropped, as in transformers.

A `datasets.Dataset` loses those columns before batching (`remove_columns`); any other data set of dict samples has
the keys dropped sample by sample before the collator runs. The labels (`label_names`, and `label`/`label_ids`) are
always kept. A forward that names no parameter (`forward(*args, **kwargs)`, a wrapper) is left alone.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

import torch

from trainer.data import default_data_collator
from trainer.errors import TrainerConfigError

logger = logging.getLogger(__name__)


def signature_columns(model: torch.nn.Module, label_names: list[str] | None) -> set[str] | None:
    """The names the model's forward takes, plus the label names; None when it names none (keep everything)."""
    target = model.get_base_model() if hasattr(model, "get_base_model") else model  # a peft model: its base
    parameters = inspect.signature(target.forward).parameters.values()
    named = {p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    if not named:
        return None
    return named | {"label", "label_ids", *(label_names or ["labels"])}


class RemoveColumnsCollator:
    """Drop the keys of each dict sample that the model does not take, then collate."""

    def __init__(self, collator: Any, keep: set[str]) -> None:
        self.collator, self.keep = collator, keep

    def __call__(self, features: list[Any]) -> Any:
        if features and isinstance(features[0], dict) and not all(f.keys() <= self.keep for f in features):
            features = [{k: v for k, v in f.items() if k in self.keep} for f in features]
        return self.collator(features)


def drop_unused_columns(
    dataset: Any, collator: Any, model: torch.nn.Module, label_names: list[str] | None
) -> tuple:
    """(dataset, collator) with the unused columns removed from a datasets.Dataset, or a filtering collator."""
    keep = signature_columns(model, label_names)
    if keep is None:
        return dataset, collator
    columns = getattr(dataset, "column_names", None)
    if isinstance(columns, list) and hasattr(dataset, "remove_columns"):
        if not any(c in keep for c in columns):
            raise TrainerConfigError(
                f"no column of the data set ({columns}) is an argument of {type(model).__name__}.forward "
                f"({sorted(keep)}); rename the columns, or set remove_unused_columns: false"
            )
        ignored = [c for c in columns if c not in keep]
        if ignored:
            logger.info(
                "columns not taken by %s.forward are removed: %s", type(model).__name__, ", ".join(ignored)
            )
            dataset = dataset.remove_columns(ignored)
        return dataset, collator
    return dataset, RemoveColumnsCollator(collator or default_data_collator, keep)
