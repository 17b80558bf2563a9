"""One wandb run per trial (or per `hpo train` run), never shared between trials.

group = the study's name, name = "trial-<number>", config = {"params": ..., "arguments": ...}, every log record at
step = the global step, and at the end a summary with the objective, the state (complete, pruned, failed) and the best
step. The run is finished with exit code 0 (complete, pruned) or 1 (failed) by `finish`, before the next trial starts.
Without an API key the mode is offline: runs are written under `<study output_dir>/wandb/` for `wandb sync`.
"""

from __future__ import annotations

import logging
import math
import os
import sys
from pathlib import Path
from typing import Any

from hpo.spec import WandbSpec
from hpo.tracking.logs import arguments_dict, numeric_items
from hpo.tracking.run_info import RunInfo
from hpo.tracking.trial_tracker import TrialTracker

logger = logging.getLogger(__name__)

# The summary's state, in wandb's words, for each status of the store.
WANDB_STATE = {"completed": "complete", "pruned": "pruned", "failed": "failed", "interrupted": "interrupted"}


def default_mode(configured: str | None) -> str:
    """The configured mode; else WANDB_MODE; else online with an API key and offline without one."""
    if configured:
        return configured
    if os.environ.get("WANDB_MODE") in ("online", "offline", "disabled"):
        return os.environ["WANDB_MODE"]
    return "online" if os.environ.get("WANDB_API_KEY") else "offline"


# wandb's temporary folders, created when these modules are imported and removed by an atexit hook.
_TEMP_FOLDERS = (
    ("wandb.sdk.data_types._private", "MEDIA_TMP"),
    ("wandb.sdk.artifacts.artifact", "Artifact._TMP_DIR"),
)


def wandb_imported() -> bool:
    return "wandb" in sys.modules


def release_wandb(imported_before: bool) -> None:
    """What wandb's atexit hooks do, for a process about to leave by `os._exit` (a forked trial), which skips them:
    end wandb's service and delete the `tmp*wandb-media` / `tmp*wandb-artifacts` folders it made at import.

    `imported_before`: wandb was imported before this process was forked; then its service and folders are the
    parent's (shared by every trial) and the parent's own exit cleans them up, so nothing is touched here."""
    if imported_before or not wandb_imported():
        return
    try:
        sys.modules["wandb"].teardown()
    except Exception as error:  # a service already gone: nothing left to end, the folders still go
        logger.warning("wandb teardown failed: %s: %s", type(error).__name__, error)
    for module_name, attribute in _TEMP_FOLDERS:
        owner: Any = sys.modules.get(module_name)
        for name in attribute.split("."):
            owner = getattr(owner, name, None)
        if owner is not None:
            owner.cleanup()


class WandbCallback(TrialTracker):
    def __init__(self, settings: WandbSpec, run: RunInfo, *, directory: str | Path) -> None:
        super().__init__()
        self.project = settings.project
        self.entity = settings.entity
        self.mode = default_mode(settings.mode)
        self.tags = list(settings.tags)
        self.run = run
        self.directory = Path(directory)
        self.wandb_run: Any = None

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero and self.wandb_run is None and self.mode != "disabled":
            self._start(arguments_dict(args))

    def _start(self, arguments: dict[str, Any] | None) -> None:
        try:
            self.wandb_run = self._init(arguments)
        except (
            Exception
        ) as error:  # wandb that cannot start (no network, bad entity) costs the wandb run only
            logger.warning(
                "wandb run for %s not started: %s: %s", self.run.run_id, type(error).__name__, error
            )
            self.mode = "disabled"

    def _init(self, arguments: dict[str, Any] | None) -> Any:
        import wandb  # here, not at the top: its import costs about a second, paid only by runs that use it

        self.directory.mkdir(parents=True, exist_ok=True)
        return wandb.init(
            project=self.project or self.run.study_name or "hpo",
            entity=self.entity,
            group=self.run.study_name if self.run.kind == "trial" else None,
            name=self.run.name,
            job_type=self.run.kind,
            tags=self.tags,
            config={"params": self.run.params, "arguments": arguments, "run_id": self.run.run_id},
            mode=self.mode,
            dir=str(self.directory),
            # Every trial is its own run even when trials share a process; the previous one was finished by us.
            reinit="create_new",
            settings=wandb.Settings(silent=True, console="off", x_disable_stats=True, disable_git=True),
        )

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.wandb_run is not None and logs:
            values = {k: v for k, v in numeric_items(logs).items() if math.isfinite(v)}
            if "epoch" in logs:
                values["epoch"] = float(logs["epoch"])
            try:
                self.wandb_run.log(values, step=state.global_step)
            except Exception as error:
                logger.warning("wandb log at step %d failed: %s", state.global_step, error)

    def on_train_end(self, args, state, control, **kwargs):
        super().on_train_end(args, state, control, **kwargs)
        if self.wandb_run is not None:
            self.wandb_run.summary["global_step"] = state.global_step

    def record_end(
        self,
        status: str,
        values: list[float] | None,
        best_step: int | None,
        error: str | None,
        data: dict[str, Any],
    ) -> None:
        if self.wandb_run is None:
            if self.train_ended or self.mode == "disabled" or os.environ.get("RANK", "0") != "0":
                return
            self._start(
                None
            )  # training never began (model_init or data raised): the trial still gets its run
        summary = {"state": WANDB_STATE.get(status, status), "best_step": best_step}
        if values:
            summary["objective"] = values[0] if len(values) == 1 else list(values)
        if error:
            summary["error"] = error
        self.wandb_run.summary.update(summary)
        self.wandb_run.finish(exit_code=1 if status == "failed" else 0)
        self.wandb_run = None
