"""Data loading: seeded, resumable samplers; device transfer; batch sizes and token counts; accumulation windows."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import torch
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    IterableDataset,
    Sampler,
    SequentialSampler,
    default_collate,
)

from trainer.args import TrainingArguments


class EpochShuffleSampler(Sampler[int]):
    """A shuffling sampler whose order is a pure function of (seed, epoch).

    Resuming therefore needs no saved generator state: the epoch number rebuilds the same permutation.
    """

    def __init__(self, data_source: Dataset, seed: int, shuffle: bool = True) -> None:
        self.num_samples = len(data_source)  # type: ignore[arg-type]
        self.seed = seed
        self.shuffle = shuffle
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        if not self.shuffle:
            return iter(range(self.num_samples))
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        return iter(torch.randperm(self.num_samples, generator=generator).tolist())

    def __len__(self) -> int:
        return self.num_samples


class ResumableBatchSampler(Sampler[list[int]]):
    """Wraps a batch sampler so that one iteration can start after the first `skip` batches.

    Batches are skipped as index lists, so no sample is loaded or collated for them.
    """

    def __init__(self, batch_sampler: Iterable[list[int]]) -> None:
        self.batch_sampler = batch_sampler
        self.skip = 0

    @property
    def sampler(self) -> Any:
        return getattr(self.batch_sampler, "sampler", None)

    def __iter__(self) -> Iterator[list[int]]:
        skip, self.skip = self.skip, 0
        iterator = iter(self.batch_sampler)
        for _ in range(skip):
            next(iterator, None)
        return iterator

    def __len__(self) -> int:
        return len(self.batch_sampler)  # type: ignore[arg-type]


def has_length(dataset: Any) -> bool:
    try:
        return len(dataset) is not None
    except (TypeError, NotImplementedError):
        return False


def train_dataloader(
    dataset: Dataset, args: TrainingArguments, batch_size: int, collator: Any, sampler: Sampler | None
) -> DataLoader:
    """The training loader. Map-style datasets get a resumable batch sampler over an (epoch, seed)-seeded order."""
    common = _loader_options(args, collator)
    if isinstance(dataset, IterableDataset) or not has_length(dataset):
        return DataLoader(dataset, batch_size=batch_size, drop_last=args.dataloader_drop_last, **common)
    sampler = sampler or EpochShuffleSampler(dataset, seed=args.sampler_seed)
    batches = ResumableBatchSampler(BatchSampler(sampler, batch_size, drop_last=args.dataloader_drop_last))
    return DataLoader(dataset, batch_sampler=batches, **common)


def eval_dataloader(
    dataset: Dataset, args: TrainingArguments, collator: Any, sampler: Sampler | None
) -> DataLoader:
    common = _loader_options(args, collator)
    if isinstance(dataset, IterableDataset) or not has_length(dataset):
        return DataLoader(dataset, batch_size=args.per_device_eval_batch_size, **common)
    sampler = sampler or SequentialSampler(dataset)
    return DataLoader(dataset, batch_size=args.per_device_eval_batch_size, sampler=sampler, **common)


def default_data_collator(features: list[Any]) -> Any:
    """torch's default_collate, with transformers' default_data_collator conventions for dict samples: a `label` or
    `label_ids` entry becomes `labels` (the name models take), and str or None entries are left out."""
    if features and isinstance(features[0], Mapping):
        first = features[0]
        rename = {"label": "labels", "label_ids": "labels"} if "labels" not in first else {}
        keep = [k for k, v in first.items() if v is not None and not isinstance(v, str)]
        # Samples that need no key dropped or renamed are collated as they are (no new dict per sample).
        if len(keep) < len(first) or any(k in rename for k in keep):
            features = [{rename.get(k, k): f[k] for k in keep} for f in features]
    return default_collate(features)


def _loader_options(args: TrainingArguments, collator: Any) -> dict[str, Any]:
    # A loader with its own generator leaves the global torch RNG (dropout's) untouched when an epoch starts,
    # which exact resume relies on.
    options = {
        "collate_fn": collator or default_data_collator,
        "num_workers": args.dataloader_num_workers,
        "pin_memory": args.dataloader_pin_memory and torch.cuda.is_available(),
        "generator": torch.Generator().manual_seed(args.sampler_seed),
    }
    if args.dataloader_num_workers > 0:  # DataLoader refuses these without worker processes
        options["persistent_workers"] = args.dataloader_persistent_workers
        options["prefetch_factor"] = args.dataloader_prefetch_factor
        options["multiprocessing_context"] = args.dataloader_multiprocessing_context
    return options


def start_epoch(loader: DataLoader, epoch: int, seed: int, skip_batches: int = 0) -> Iterator[Any]:
    """An iterator over one epoch's batches, the first `skip_batches` left out."""
    batch_sampler = loader.batch_sampler
    sampler = getattr(batch_sampler, "sampler", None)
    if hasattr(sampler, "set_epoch"):
        sampler.set_epoch(epoch)
    if loader.generator is not None:
        loader.generator.manual_seed(seed + epoch)  # worker seeds depend on the epoch only
    if isinstance(batch_sampler, ResumableBatchSampler):
        batch_sampler.skip = skip_batches
        return iter(loader)
    iterator = iter(loader)
    for _ in range(skip_batches):  # an iterable dataset: the seen batches must be drawn again
        next(iterator, None)
    return iterator


def accumulation_windows(batches: Iterator[Any], size: int) -> Iterator[list[Any]]:
    """Group micro-batches into optimizer steps; the last window of an epoch may be shorter."""
    if size == 1:
        for batch in batches:
            yield [batch]
        return
    window: list[Any] = []
    for batch in batches:
        window.append(batch)
        if len(window) == size:
            yield window
            window = []
    if window:
        yield window


def map_tensors(batch: Any, change: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """The batch with `change` applied to every tensor in it (nested dicts, lists, tuples, named tuples)."""
    if torch.is_tensor(batch):
        return change(batch)
    if isinstance(batch, dict):
        return type(batch)({k: map_tensors(v, change) for k, v in batch.items()})
    if isinstance(batch, (list, tuple)):
        changed = [map_tensors(v, change) for v in batch]
        return type(batch)(*changed) if hasattr(batch, "_fields") else type(batch)(changed)
    if hasattr(batch, "keys") and hasattr(batch, "__getitem__"):  # transformers' BatchEncoding (a UserDict)
        return {k: map_tensors(batch[k], change) for k in batch.keys()}
    return batch


def move_to_device(batch: Any, device: torch.device) -> Any:
    if hasattr(batch, "to") and hasattr(batch, "keys") and not isinstance(batch, dict):
        return batch.to(device)  # transformers' BatchEncoding moves itself and stays one
    return map_tensors(batch, lambda tensor: tensor.to(device, non_blocking=True))


def cast_floating(batch: Any, dtype: torch.dtype) -> Any:
    """The batch with its floating-point tensors in `dtype` (integer ids and labels as they are)."""
    return map_tensors(batch, lambda tensor: tensor.to(dtype) if torch.is_floating_point(tensor) else tensor)


def first_tensor(batch: Any) -> torch.Tensor | None:
    if torch.is_tensor(batch):
        return batch
    values = batch.values() if hasattr(batch, "values") else batch if isinstance(batch, (list, tuple)) else ()
    for value in values:
        found = first_tensor(value)
        if found is not None:
            return found
    return None


def batch_size_of(batch: Any) -> int:
    # fast paths for the usual batches (this runs every step): a dict or a tuple whose first entry is a tensor
    first = (
        next(iter(batch.values()), None)
        if type(batch) is dict
        else batch[0]
        if type(batch) in (tuple, list)
        else None
    )
    if type(first) is torch.Tensor and first.ndim:
        return first.shape[0]
    tensor = first_tensor(batch)
    return 1 if tensor is None or tensor.ndim == 0 else tensor.shape[0]


def tokens_in(batch: Any, non_padding: bool = False, pad_token_id: int | None = None) -> int:
    """Input tokens of a batch (the size of `input_ids`), 0 when the batch has none. With `non_padding`, only the
    tokens its attention_mask keeps, or without a mask the ones that are not `pad_token_id` (transformers' rule)."""
    if hasattr(batch, "get"):
        input_ids = batch.get("input_ids")
        if torch.is_tensor(input_ids):
            if not non_padding:
                return input_ids.numel()
            mask = batch.get("attention_mask")
            if torch.is_tensor(mask):
                return int(mask.sum())
            if pad_token_id is not None:
                return int((input_ids != pad_token_id).sum())
            return input_ids.numel()
    return 0
