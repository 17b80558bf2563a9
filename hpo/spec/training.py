"""Check a `training:` mapping against `trainer.TrainingArguments` without training anything.

The TrainingArguments dataclass is the single source of truth for field names, types and ranges; this module only
turns its `TrainerConfigError` into a message that names the field path (`training.learning_rate: ...`).
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from functools import cache
from typing import Any

from hpo.spec.errors import FieldProblem
from trainer import TrainingArguments
from trainer.errors import TrainerConfigError

# Fields the run or study decides; a file that sets them under `training:` is told where they belong.
MANAGED_FIELDS = {
    "output_dir": "set output_dir at the top of a run file, or study.output_dir in a study file"
}


@cache
def training_field_names() -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(TrainingArguments))


def read_strategies(training: dict[str, Any]) -> dict[str, Any]:
    """`save_strategy: no` is how users of the transformers names write it, and YAML reads `no` (`off`, `false`) as
    false: every `*_strategy` field takes false as "no". (`true` has no meaning there and is left to be refused.)"""
    return {
        key: "no" if str(key).endswith("_strategy") and value is False else value
        for key, value in training.items()
    }


def check_training_keys(training: dict[str, Any]) -> None:
    names = training_field_names()
    for key in training:
        if key in MANAGED_FIELDS:
            raise FieldProblem(str(key), f"not allowed here ({MANAGED_FIELDS[key]})")
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f" (did you mean {close[0]}?)" if close else " (not a TrainingArguments field)"
            raise FieldProblem(str(key), f"unknown field{hint}")


def build_training_arguments(training: dict[str, Any], output_dir: str, **overrides: Any) -> Any:
    """A fresh, validated TrainingArguments; a bad value raises FieldProblem naming the field."""
    check_training_keys(training)
    check_training_keys(overrides)
    values = read_strategies({**training, **overrides, "output_dir": output_dir})
    try:
        return TrainingArguments(**values)
    except TrainerConfigError as error:
        field, message = _split_message(str(error), values)
        raise FieldProblem(field, message) from error


def _split_message(message: str, values: dict[str, Any]) -> tuple[str | None, str]:
    """Find which field a TrainerConfigError is about: the first quoted name that is a field the user set."""
    quoted = re.findall(r"'(\w+)'", message)
    names = training_field_names()
    field = next((q for q in quoted if q in values and q in names and q != "output_dir"), None)
    field = field or next((q for q in quoted if q in names), None)
    if field is not None:
        message = message.removeprefix(f"training argument '{field}' ")
        message = f"value {message}" if message.startswith("is ") else message
    return field, message
