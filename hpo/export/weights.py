"""Weights of a checkpoint as one consolidated state dict, and loading them into a freshly built model.

Every strategy's checkpoint normally holds a consolidated `model.safetensors` (DeepSpeed and FSDP with full state dicts
write one on rank 0). An FSDP checkpoint saved with `state_dict_type: SHARDED_STATE_DICT` holds only
`fsdp_shard_rank<r>.safetensors` files: each parameter is split along its first dimension across the ranks (FSDP2's
Shard(0)); buffers are replicated. Those are stitched back together here, using the freshly built model's shapes to tell
a sharded tensor from a replicated one. Weights are only ever read with safetensors.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file

from hpo.errors import ConfigError, HpoError
from trainer.safe_load import PICKLE_SUFFIXES

MODEL_FILE = "model.safetensors"
_SHARD = re.compile(r"^fsdp_shard_rank(\d+)\.safetensors$")


def checkpoint_state_dict(checkpoint: Path, model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The consolidated weights of `checkpoint`, shaped like `model`'s state dict."""
    checkpoint = Path(checkpoint)
    if (checkpoint / MODEL_FILE).is_file():
        return read_weights(checkpoint / MODEL_FILE)
    shards = sorted(
        (int(m.group(1)), p)
        for p in checkpoint.glob("fsdp_shard_rank*.safetensors")
        if (m := _SHARD.match(p.name))
    )
    if shards:
        return consolidate_fsdp_shards([p for _, p in shards], model.state_dict())
    raise ConfigError(
        f"{checkpoint} holds no weights: neither {MODEL_FILE} nor FSDP shard files (fsdp_shard_rank<r>.safetensors)"
        f"{pickle_note(checkpoint)}; export another trial (--trial N) or a checkpoint this trainer wrote"
    )


def pickle_note(folder: Path) -> str:
    """Why a `pytorch_model.bin` beside the missing safetensors file is not used: it is a pickle, which runs code."""
    pickles = sorted(
        p.name for p in Path(folder).glob("*") if p.suffix in PICKLE_SUFFIXES and "model" in p.name
    )
    if not pickles:
        return ""
    return (
        f"; {', '.join(pickles)} is a pickle, and weights are read from safetensors only (it could run code)"
    )


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    """A safetensors file, refused by name when missing (a pickle beside it is never read instead)."""
    if not path.is_file():
        raise ConfigError(f"{path.parent}: no {path.name}{pickle_note(path.parent)}; export the model again")
    return _load_safetensors(path)


def _load_safetensors(path: Path) -> dict[str, torch.Tensor]:
    """safetensors' load, with a damaged file (cut short by a full disk, overwritten) named in one line."""
    try:
        return load_file(str(path))
    except SafetensorError as error:
        raise HpoError(
            f"{path}: not a readable safetensors file ({error}): it was cut short or damaged after it was written; "
            "export another trial (--trial N), or train this one again (hpo retrain)"
        ) from None


def consolidate_fsdp_shards(
    shard_files: list[Path], expected: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    world_size = _world_size(shard_files[0])
    if world_size is not None and world_size != len(shard_files):
        raise HpoError(
            f"{shard_files[0].parent}: {len(shard_files)} shard files for a {world_size}-rank checkpoint"
        )
    per_rank = [_model_tensors(path) for path in shard_files]
    state: dict[str, torch.Tensor] = {}
    for name, reference in expected.items():
        pieces = [rank_tensors.get(name) for rank_tensors in per_rank]
        if pieces[0] is None:
            raise HpoError(f"FSDP shards in {shard_files[0].parent} have no tensor {name!r}")
        if tuple(pieces[0].shape) == tuple(reference.shape):
            state[name] = pieces[0]  # replicated (a buffer), or a parameter one rank holds whole
            continue
        whole = torch.cat([p for p in pieces if p is not None and p.numel()], dim=0)
        if tuple(whole.shape) != tuple(reference.shape):
            raise HpoError(
                f"FSDP shards of {name!r} join to shape {tuple(whole.shape)}, the model expects {tuple(reference.shape)}"
            )
        state[name] = whole
    return state


def _world_size(path: Path) -> int | None:
    with safe_open(str(path), framework="pt") as handle:
        meta = (handle.metadata() or {}).get("fsdp")
    return json.loads(meta).get("world_size") if meta else None


def _model_tensors(path: Path) -> dict[str, torch.Tensor]:
    tensors = _load_safetensors(path)
    return {name[len("model.") :]: t for name, t in tensors.items() if name.startswith("model.")}


def load_into(model: torch.nn.Module, state: dict[str, torch.Tensor], *, source: str) -> torch.nn.Module:
    """Load `state` strictly, except for tied weights that safetensors stored once (their twin is loaded)."""
    result = model.load_state_dict(state, strict=False)
    if result.unexpected_keys:
        raise HpoError(f"{source}: weights for {sorted(result.unexpected_keys)[:5]} do not fit the model")
    model_state = model.state_dict()
    loaded_storages = {model_state[name].data_ptr() for name in state if name in model_state}
    missing = [name for name in result.missing_keys if model_state[name].data_ptr() not in loaded_storages]
    if missing:
        raise HpoError(
            f"{source}: no weights for {sorted(missing)[:5]} (the model does not match the checkpoint)"
        )
    return model
