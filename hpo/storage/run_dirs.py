"""Where a trial's folder is: `trial-<number>/` under the study's output folder.

Each trial records its folder (`run_dir`) in the storage, and housekeeping deletes checkpoints under it. The storage is
shared (a PostgreSQL server, a copied SQLite file) and not the study file, so a recorded folder is trusted only inside
the study's output folder: one anywhere else (`/`, `../other-study`) is never where this study's checkpoints are.
"""

from __future__ import annotations

from pathlib import Path

from optuna.trial import FrozenTrial


def trial_run_dir(trial: FrozenTrial, output_dir: str | Path) -> Path:
    """The trial's recorded folder when it lies inside `output_dir`, else the folder the study gives trial N."""
    default = Path(output_dir) / f"trial-{trial.number}"
    recorded = trial.user_attrs.get("run_dir")
    if not isinstance(recorded, str) or not recorded or "\0" in recorded:
        return default
    return Path(recorded) if is_inside(Path(recorded), Path(output_dir)) else default


def is_inside(path: Path, folder: Path) -> bool:
    """Whether `path` is `folder` or below it once `..` and symbolic links are resolved."""
    return path.resolve().is_relative_to(folder.resolve())
