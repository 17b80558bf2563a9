"""What a run costs beside time: the parameters it trained and the size of its checkpoint on disk.

Recorded for every run (full fine-tuning and adapters alike), so a LoRA study and a full one compare on the same
columns: `trainable_params` (the optimizer's parameters: an adapter's only) and `checkpoint_bytes` (the best checkpoint
folder, else the newest: what keeping one checkpoint per trial costs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainer.checkpoint_names import folder_bytes, latest_checkpoint


def footprint(model: Any, state: Any, output_dir: str | Path) -> dict[str, int]:
    found: dict[str, int] = {}
    if model is not None:
        found["trainable_params"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
    best = getattr(state, "best_model_checkpoint", None)
    checkpoint = Path(best) if best and Path(best).is_dir() else latest_checkpoint(output_dir)
    if checkpoint is not None:
        found["checkpoint_bytes"] = folder_bytes(checkpoint)
    return found
