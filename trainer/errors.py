"""Errors raised by the trainer. They name what went wrong and how to fix it."""

from __future__ import annotations


class TrainerError(Exception):
    """Base class of the trainer's own errors."""


class TrainerConfigError(TrainerError, ValueError):
    """A bad argument or combination of arguments; the message names the field and the fix."""


class NonFiniteLossError(TrainerError, RuntimeError):
    """The training loss stayed NaN or infinite for `args.max_non_finite_steps` optimizer steps in a row."""


class CheckpointError(TrainerError, RuntimeError):
    """A checkpoint folder is missing, incomplete or does not fit this run."""
