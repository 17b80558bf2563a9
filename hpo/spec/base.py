"""The base of every section model: unknown keys are errors, and defaults are validated like given values."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)

    # A key that belongs somewhere else -> the hint shown instead of "unknown field".
    moved_fields: ClassVar[dict[str, str]] = {}
    # Optional sub-sections a file may switch on with `true` (their defaults) or off with `false` (as if absent):
    # field name -> what `true` means, for the message when the value is neither a switch nor a mapping.
    switches: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _switch_sections(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not cls.switches:
            return data
        switched = {
            name: ({} if value else None)
            for name, value in data.items()
            if name in cls.switches and isinstance(value, bool)
        }
        return {**data, **switched} if switched else data
