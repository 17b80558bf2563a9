"""A Ctrl-C that Python swallows: KeyboardInterrupt raised inside a finalizer, where the interpreter prints
"Exception ignored" and goes on (as during torch's imports). For the tests of hpo.scheduling.early_interrupt."""

from __future__ import annotations

import gc
import os
import signal
from collections.abc import Iterator

from hpo.scheduling import early_interrupt


def restoring_sigint() -> Iterator[None]:
    """A fixture body: SIGINT's handler as it was, and no remembered press, after the test."""
    previous = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, previous)
    early_interrupt.was_swallowed()


class PressedWhileCollected:
    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # the handler's KeyboardInterrupt is ignored inside __del__


def press_swallowed() -> None:
    """Install the command entry's handler, then press Ctrl-C where Python swallows it."""
    early_interrupt.install()
    PressedWhileCollected()
    gc.collect()  # no KeyboardInterrupt comes out of here: the interpreter ignored it
