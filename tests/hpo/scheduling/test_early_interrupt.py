"""A Ctrl-C swallowed while a command imports (Python prints "Exception ignored" for a KeyboardInterrupt raised in a
`__del__` or weakref callback) still stops the command: the stop handler installed later takes the press as made.
Last stop's CI saw `hpo worker` run its study to the end and exit 0 after such a press."""

from __future__ import annotations

import os
import signal

import pytest
from swallowed_press import press_swallowed, restoring_sigint

from hpo.scheduling import early_interrupt
from hpo.scheduling.worker import StopRequests

sigint_restored = pytest.fixture(autouse=True)(restoring_sigint)


def test_a_press_raises_as_python_does():
    early_interrupt.install()
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
    assert early_interrupt.was_swallowed()  # remembered either way; a command that saw it exits before asking


# pytest reports the ignored exception as this warning, where a command's user sees "Exception ignored in: ..."
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_press_swallowed_in_a_finalizer_is_handed_to_the_stop_handler():
    press_swallowed()
    stops = StopRequests()
    stops.install()
    assert stops.level == 1  # checkpoint and stop, as if the press had come after
    assert not early_interrupt.was_swallowed()  # handed over once


def test_without_a_press_the_stop_handler_starts_at_zero():
    early_interrupt.install()
    stops = StopRequests()
    stops.install()
    assert stops.level == 0
