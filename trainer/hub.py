"""transformers' Hub methods: `create_model_card` writes a local README.md; `push_to_hub` refuses (offline).

An example script ends with `trainer.push_to_hub(**kwargs)` when `--push_to_hub` is given, else with
`trainer.create_model_card(**kwargs)`. The card needs no network, so it is written; the push cannot happen here, and
says so in one line (`push_to_hub` the argument is refused the same way, when the arguments are built).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainer.errors import TrainerConfigError

if TYPE_CHECKING:
    from trainer.args import TrainingArguments
    from trainer.state import TrainerState

_HYPERPARAMETERS = (
    "learning_rate",
    "per_device_train_batch_size",
    "per_device_eval_batch_size",
    "seed",
    "gradient_accumulation_steps",
    "optim",
    "lr_scheduler_type",
    "warmup_steps",
    "num_train_epochs",
    "max_steps",
)


def _as_list(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


class HubMixin:
    """Needs `args`, `state` and `is_world_process_zero()` on the Trainer."""

    args: TrainingArguments
    state: TrainerState

    def push_to_hub(
        self, commit_message: str | None = "End of training", blocking: bool = True, **kwargs: Any
    ) -> None:
        raise TrainerConfigError(
            "push_to_hub is not available: this Trainer works offline; save with trainer.save_model() and upload "
            "the folder with `huggingface-cli upload`"
        )

    def create_model_card(
        self,
        language: str | None = None,
        license: str | None = None,
        tags: str | list[str] | None = None,
        model_name: str | None = None,
        finetuned_from: str | None = None,
        tasks: str | list[str] | None = None,
        dataset_tags: str | list[str] | None = None,
        dataset: str | list[str] | None = None,
        dataset_args: str | list[str] | None = None,
    ) -> None:
        """Write `README.md` in output_dir: a metadata header, the hyperparameters and the evaluation history."""
        if not self.is_world_process_zero():  # type: ignore[attr-defined]
            return
        folder = Path(self.args.output_dir)
        folder.mkdir(parents=True, exist_ok=True)
        name = model_name or folder.name
        header = {
            "library_name": "transformers",
            "license": license,
            "language": language,
            "tags": _as_list(tags) + ["generated_from_trainer"],
            "base_model": finetuned_from,
            "datasets": _as_list(dataset) or None,
            "model-index": [{"name": name, "results": []}],
        }
        lines = ["---"]
        lines += [f"{key}: {json.dumps(value)}" for key, value in header.items() if value is not None]
        lines += ["---", "", f"# {name}", ""]
        if finetuned_from:
            lines += [f"This model is a fine-tuned version of {finetuned_from}.", ""]
        lines += ["## Training hyperparameters", ""]
        args = self.args.to_dict()
        lines += [f"- {key}: {args[key]}" for key in _HYPERPARAMETERS]
        evaluations = [entry for entry in self.state.log_history if "eval_loss" in entry]
        if evaluations:
            lines += [
                "",
                "## Evaluation during training",
                "",
                "| step | epoch | eval_loss |",
                "|---|---|---|",
            ]
            lines += [f"| {e['step']} | {e.get('epoch', '')} | {e['eval_loss']:.4f} |" for e in evaluations]
        (folder / "README.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
