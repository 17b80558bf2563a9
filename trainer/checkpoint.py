"""Checkpoint folders: atomic writes, listing, rotation, and the files beside the strategy's own.

Layout: `output_dir/checkpoint-<global_step>/` with model.safetensors, optimizer.pt, scheduler.pt, scaler.pt (fp16),
rng_state.pth (rng_state_<rank>.pth on other ranks), trainer_state.json and training_args.json. A checkpoint is written
into `output_dir/.checkpoint-<step>.tmp` and renamed into place, so a folder named `checkpoint-<step>` is complete: a
crash during a save leaves only a temporary folder, which listing ignores and the next save of that step replaces.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from trainer.adapters import is_adapter_model
from trainer.checkpoint_names import (  # also what this module's users have always imported from here
    _NAME,
    ARGS_FILE,
    PREFIX,
    STATE_FILE,
    checkpoint_dir,
    is_complete,
    latest_checkpoint,
    list_checkpoints,
)
from trainer.checkpoint_names import (
    folder_bytes as folder_bytes,  # still importable from here, as before the split
)
from trainer.errors import CheckpointError
from trainer.file_modes import follow_umask
from trainer.safe_load import check_pickles, load_torch_file
from trainer.seed import rng_state, set_rng_state


def _temporary_dir(output_dir: str | Path, step: int) -> Path:
    return Path(output_dir) / f".{PREFIX}-{step}.tmp"


def resolve_resume(resume_from_checkpoint: bool | str | Path | None, output_dir: str | Path) -> Path | None:
    """`True` -> the newest complete checkpoint in output_dir; a path -> that checkpoint, checked."""
    if resume_from_checkpoint is None or resume_from_checkpoint is False:
        return None
    if resume_from_checkpoint is True:
        found = latest_checkpoint(output_dir)
        if found is None:
            raise CheckpointError(
                f"resume_from_checkpoint=True but {output_dir} holds no complete checkpoint"
            )
        return found
    path = Path(resume_from_checkpoint)
    if not path.is_dir():
        raise CheckpointError(f"checkpoint folder {path} does not exist")
    if not (path / STATE_FILE).is_file():
        raise CheckpointError(f"{path} is not a complete checkpoint: it has no {STATE_FILE}")
    return path


def check_resumable(path: Path) -> None:
    """A save_only_model checkpoint has weights but no optimizer or scheduler: refuse to resume from it. A folder with
    a pickle that would run code is refused before any strategy (DeepSpeed's loader too) opens a file of it."""
    check_pickles(path)
    saved_args = (
        json.loads((path / ARGS_FILE).read_text(encoding="utf-8")) if (path / ARGS_FILE).exists() else {}
    )
    if saved_args.get("save_only_model"):
        raise CheckpointError(
            f"{path} was saved with save_only_model (no optimizer or scheduler): training cannot resume from it; "
            "load its model.safetensors into a new run instead"
        )


def _fsync_tree(folder: Path) -> None:
    """Flush the files before the rename, so that after a power cut the renamed folder is not full of holes."""
    for path in folder.rglob("*"):
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())


def write_atomically(
    output_dir: str | Path,
    step: int,
    write: Callable[[Path], None],
    *,
    is_main: bool,
    barrier: Callable[[], None],
) -> Path:
    """Create a temporary folder, let every rank `write(tmp)` into it, then rank 0 renames it into place."""
    write_temporary(output_dir, step, write, is_main=is_main, barrier=barrier)
    if is_main:
        publish(output_dir, step)
    barrier()
    return checkpoint_dir(output_dir, step)


def write_temporary(
    output_dir: str | Path,
    step: int,
    write: Callable[[Path], None],
    *,
    is_main: bool,
    barrier: Callable[[], None],
) -> Path:
    """The first half of an atomic save: every rank's files written into the step's temporary folder."""
    temporary = _temporary_dir(output_dir, step)
    if is_main:
        shutil.rmtree(temporary, ignore_errors=True)  # left by a crash during an earlier save
        temporary.mkdir(parents=True)
    barrier()
    write(temporary)
    barrier()
    return temporary


def publish(output_dir: str | Path, step: int, *, in_background: bool = False) -> Path:
    """The second half: flush the temporary folder's files, rename it into place, drop leftovers of crashed saves.
    `in_background`: on a thread while a later step's temporary folder may be being written
    (trainer.checkpoint_finisher): only leftovers up to this step go."""
    final, temporary = checkpoint_dir(output_dir, step), _temporary_dir(output_dir, step)
    follow_umask(temporary)
    _fsync_tree(temporary)
    _replace(temporary, final)
    remove_stale_temporaries(output_dir, up_to=step if in_background else None)
    return final


def remove_stale_temporaries(output_dir: str | Path, up_to: int | None = None) -> None:
    """Delete half-written folders that crashed saves left behind; with `up_to`, only those of steps up to it (a later
    step's may be a save under way while this one is published in the background)."""
    for path in Path(output_dir).glob(f".{PREFIX}-*"):
        if not (path.is_dir() and path.suffix in (".tmp", ".old")):
            continue
        step = path.stem.rpartition("-")[2]
        if up_to is None or (step.isdigit() and int(step) <= up_to):
            shutil.rmtree(path, ignore_errors=True)


def _replace(source: Path, target: Path) -> None:
    if target.exists():  # saving the same step again (after a resume): move the old one away first
        trash = target.with_name(f".{target.name}.old")
        shutil.rmtree(trash, ignore_errors=True)
        os.replace(target, trash)
        os.replace(source, target)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.replace(source, target)


def copy_checkpoint(source: str | Path, output_dir: str | Path) -> Path:
    """Copy a complete checkpoint into `output_dir` under the same step (PBT's exploit), atomically as a save is: a
    crash during the copy leaves only a temporary folder. An existing checkpoint of that step is replaced."""
    source = Path(source)
    if not is_complete(source):
        raise CheckpointError(f"{source} is not a complete checkpoint: it has no {STATE_FILE}")
    step = int(_NAME.match(source.name).group(1))
    final, temporary = checkpoint_dir(output_dir, step), _temporary_dir(output_dir, step)
    shutil.rmtree(temporary, ignore_errors=True)
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, temporary)
    _fsync_tree(temporary)
    _replace(temporary, final)
    return final


def rotate_checkpoints(output_dir: str | Path, limit: int | None, best: str | Path | None) -> list[Path]:
    """Delete the oldest checkpoints beyond `limit`, never the best nor the newest. Returns what was deleted."""
    if limit is None:
        return []
    found = list_checkpoints(output_dir)
    best_path = Path(best).resolve() if best else None
    protected = {found[-1].resolve()} if found else set()
    if best_path is not None:
        protected.add(best_path)
    keep_at_least = max(limit, len(protected))
    deletable = [p for p in found if p.resolve() not in protected]
    excess = len(found) - keep_at_least
    deleted = deletable[: max(0, excess)]
    for path in deleted:
        shutil.rmtree(path, ignore_errors=True)
    return deleted


# ---- RNG state ---------------------------------------------------------------------------------------------------
def save_pretrained_extras(model: Any, processing_class: Any, folder: Path) -> None:
    """The model's config (and generation config) and the processing class, as save_pretrained writes them. An
    adapter (peft) checkpoint holds the adapter's own files only, as peft writes it."""
    config = None if is_adapter_model(model) else getattr(model, "config", None)
    if hasattr(config, "save_pretrained"):
        config.save_pretrained(str(folder))
    generation = getattr(model, "generation_config", None)
    if (
        config is not None
        and hasattr(generation, "save_pretrained")
        and getattr(model, "can_generate", lambda: False)()
    ):
        generation.save_pretrained(str(folder))
    if hasattr(processing_class, "save_pretrained"):
        processing_class.save_pretrained(str(folder))


def rng_file(rank: int) -> str:
    return "rng_state.pth" if rank == 0 else f"rng_state_{rank}.pth"


def save_rng_state(directory: Path, rank: int) -> None:
    torch.save(rng_state(), directory / rng_file(rank))


def load_rng_state(directory: Path, rank: int) -> bool:
    path = directory / rng_file(rank)
    if not path.exists():
        return False
    set_rng_state(load_torch_file(path))
    return True


# ---- weights outside a checkpoint ----------------------------------------------------------------------------
def deduplicate_shared(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """safetensors refuses tensors that share memory (tied weights): keep the first name of each storage."""
    seen: set[tuple[int, int]] = set()
    unique: dict[str, torch.Tensor] = {}
    for name, tensor in state_dict.items():
        key = (
            (tensor.untyped_storage().data_ptr(), tensor.storage_offset())
            if tensor.numel()
            else (id(tensor), 0)
        )
        if key in seen:
            continue
        seen.add(key)
        unique[name] = tensor.contiguous()
    return unique


def save_weights(state_dict: dict[str, Any], path: Path) -> None:
    from safetensors.torch import save_file

    save_file(deduplicate_shared(state_dict), str(path), metadata={"format": "pt"})
