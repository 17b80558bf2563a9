"""A Ctrl-C that lands while a command still imports is not lost.

Python's own SIGINT handler raises KeyboardInterrupt in whatever Python code runs at that moment; during torch's and
optuna's imports that is now and then a weakref or `__del__` callback, where the interpreter prints "Exception ignored"
and goes on: the command would then run its study to the end and exit 0. `install` (at the command's entry) raises as
Python does and also remembers the press; whoever installs the real stop handler later asks `was_swallowed` and
treats the press as made."""

from __future__ import annotations

import signal
from typing import Any

_pressed = False


def install() -> None:
    signal.signal(signal.SIGINT, _on_press)


def _on_press(signum: int, frame: Any) -> None:
    global _pressed
    _pressed = True
    raise KeyboardInterrupt


def was_swallowed() -> bool:
    """Whether a press came before the caller's own handler: had its KeyboardInterrupt gone up, nothing would be here
    to ask. Read once: the press is handed over."""
    global _pressed
    pressed, _pressed = _pressed, False
    return pressed


def raise_if_swallowed() -> None:
    """For code that stops on KeyboardInterrupt itself (`hpo train`, trials run in the command's own process): a press
    swallowed earlier raises now, where it is handled as a press before any work started."""
    if was_swallowed():
        raise KeyboardInterrupt
