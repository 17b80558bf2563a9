"""The base of every section model: unknown keys are errors, and defaults are validated like given values."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)

    # A key that belongs somewhere else -> the hint shown instead of "unknown field".
    moved_fields: ClassVar[dict[str, str]] = {}
