"""The tail of every transformers example script: print, save and persist a run's metrics and state.

`trainer.log_metrics(split, metrics)`, `trainer.save_metrics(split, metrics)`, `trainer.save_state()`,
`trainer.is_world_process_zero()` and `trainer.is_local_process_zero()` behave as transformers' do (the same file
names, JSON layout and console table), so run_glue.py, run_clm.py and the others end as they do there. Only the main
process writes or prints.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainer.checkpoint import STATE_FILE

if TYPE_CHECKING:
    from trainer.args import TrainingArguments
    from trainer.state import TrainerState
    from trainer.strategies.base import Strategy


def _seconds_as_time(seconds: float) -> str:
    """hh:mm:ss.cc, as transformers prints runtimes."""
    hundredths = int(abs(seconds - int(seconds)) * 100)
    return f"{datetime.timedelta(seconds=int(seconds))}.{hundredths:02d}"


def metrics_format(metrics: dict[str, Any]) -> dict[str, Any]:
    """Metrics made readable: memory in MB, runtimes as hh:mm:ss.cc, total_flos in GF, floats to 4 decimals."""
    formatted = dict(metrics)
    for key, value in formatted.items():
        if "_mem_" in key and isinstance(value, int):
            formatted[key] = f"{value >> 20}MB"
        elif "_runtime" in key and isinstance(value, (int, float)):
            formatted[key] = _seconds_as_time(value)
        elif key == "total_flos" and isinstance(value, (int, float)):
            formatted[key] = f"{int(value) >> 30}GF"
        elif isinstance(value, float):
            formatted[key] = round(value, 4)
    return formatted


class MetricsReportingMixin:
    """The Trainer methods example scripts end with. Needs `args`, `state` and `strategy` on the Trainer."""

    args: TrainingArguments
    state: TrainerState
    strategy: Strategy

    def is_world_process_zero(self) -> bool:
        """Whether this is the main process of the whole job (the one that writes files)."""
        return bool(self.strategy.is_global_zero)

    def is_local_process_zero(self) -> bool:
        """Whether this is the main process of this machine."""
        return bool(self.strategy.is_local_zero)

    def metrics_format(self, metrics: dict[str, Any]) -> dict[str, Any]:
        return metrics_format(metrics)

    def log_metrics(self, split: str, metrics: dict[str, Any]) -> None:
        """Print `***** <split> metrics *****` and one aligned `key = value` line per metric (main process)."""
        if not self.is_world_process_zero() or not metrics:
            return
        print(f"***** {split} metrics *****")
        formatted = metrics_format(metrics)
        key_width = max(len(str(key)) for key in formatted)
        value_width = max(len(str(value)) for value in formatted.values())
        for key in sorted(formatted):
            print(f"  {key: <{key_width}} = {formatted[key]:>{value_width}}")

    def save_metrics(self, split: str, metrics: dict[str, Any], combined: bool = True) -> None:
        """Write `<split>_results.json` in output_dir and, with `combined`, merge into `all_results.json`."""
        if not self.is_world_process_zero():
            return
        folder = Path(self.args.output_dir)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{split}_results.json").write_text(
            json.dumps(metrics, indent=4, sort_keys=True), encoding="utf-8"
        )
        if combined:
            path = folder / "all_results.json"
            merged = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
            merged.update(metrics)
            path.write_text(json.dumps(merged, indent=4, sort_keys=True), encoding="utf-8")

    def save_state(self) -> None:
        """Write the run's `trainer_state.json` into output_dir (save_model writes only the weights)."""
        if not self.is_world_process_zero():
            return
        folder = Path(self.args.output_dir)
        folder.mkdir(parents=True, exist_ok=True)
        self.state.save_to_json(folder / STATE_FILE)
