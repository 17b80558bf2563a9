"""Each checkpoint to the object store as soon as it is saved, when the output folder is a URL (hpo.storage.remote).

The Trainer fires `on_save` after it renamed `checkpoint-<step>/` into place, so the folder is complete; the upload runs
then, in the training thread: a checkpoint another machine may resume from must be in the store before the trial goes
on (or pauses, or stops on a preemption). What moved is kept in the trial's `uploaded` attribute (files, bytes,
seconds, checkpoints, the newest one's step), for `hpo status` readers and the figures of bench/overhead/object_store.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpo.storage import remote
from trainer import TrainerCallback
from trainer.checkpoint_names import checkpoint_dir


class UploadCallback(TrainerCallback):
    def __init__(
        self,
        output_dir: str,
        record: Callable[[dict[str, Any]], None] | None = None,
        earlier: dict[str, Any] | None = None,
    ) -> None:
        self.output_dir = output_dir
        self.record = record
        # A paused trial that continues (ASHA, PBT) adds to what its earlier pieces uploaded.
        self.total = {"checkpoints": 0, "files": 0, "bytes": 0, "seconds": 0.0, **(earlier or {})}

    def on_save(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return  # one process writes the checkpoint files (the Trainer's rank 0): it uploads them
        done = remote.upload(checkpoint_dir(args.output_dir, state.global_step), self.output_dir)
        if done is None:
            return
        self.total["checkpoints"] += 1
        self.total["files"] += done.files
        self.total["bytes"] += done.bytes
        self.total["seconds"] = round(self.total["seconds"] + done.seconds, 3)
        self.total["step"] = state.global_step  # the newest checkpoint in the store
        if self.record is not None:
            self.record(dict(self.total))


def upload_callbacks(
    output_dir: str,
    record: Callable[[dict[str, Any]], None] | None = None,
    earlier: dict[str, Any] | None = None,
) -> list:
    """[UploadCallback] when `output_dir` is the mirror of an object store, else []."""
    if remote.store_of(Path(output_dir)) is None:
        return []
    return [UploadCallback(output_dir, record, earlier)]
