"""Ctrl-C of `hpo train --nproc N`: every rank saves at the same step, and the command says it once.

The terminal's Ctrl-C reaches the launcher only (torch elastic starts each rank in a session of its own). torch
elastic's own handler would turn it into a SignalException, send the ranks a closing signal and print a traceback. So
the launcher keeps SIGINT from torch elastic and passes each press on to the ranks, which handle it as a one-process
run does (a checkpoint at the next step boundary; a second press stops at once), agreeing on the step through rank 0
(`InterruptCallback`). Rank 0 reports what it saved in a small file that the launcher reads back to print one line
with the command that continues.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

from hpo.errors import Interrupted

# Set by the launcher for its ranks: where rank 0 writes what it saved when stopped.
STOP_REPORT_ENV = "HPO_RANKS_STOP_REPORT"
# The signals on which torch elastic terminates the ranks (`launch_ranks(signals_to_handle=...)`): SIGINT left out.
ELASTIC_SIGNALS = "SIGTERM,SIGHUP,SIGQUIT"
ELASTIC_LOG = logging.getLogger("torch.distributed.elastic.multiprocessing.api")


class LauncherStop:
    """What the launcher saw of a Ctrl-C: how many presses, and rank 0's report once the ranks have ended."""

    def __init__(self, report: Path) -> None:
        self.report = report
        self.presses = 0

    def on_sigint(self, signum: int, frame: Any) -> None:
        """Pass each press on to the ranks (torch elastic starts them in sessions of their own, so the terminal's
        Ctrl-C reaches only this process); they decide what to save."""
        self.presses += 1
        for rank in psutil.Process().children():
            with contextlib.suppress(psutil.Error):
                rank.send_signal(signal.SIGINT)

    def interrupted(self, continue_with: str) -> Interrupted:
        """The one line the command ends with: rank 0's account, or (ranks that stopped at once) what to try."""
        saved = _read_report(self.report)
        if saved is None:
            return Interrupted(
                "stopped at once: the ranks ended before they agreed on a checkpoint; continue with: "
                f"{continue_with} --resume (the newest complete checkpoint), or without --resume if none was saved"
            )
        again = " --resume" if saved.get("checkpoint") else ""
        return Interrupted(f"{saved['message']}; continue with: {continue_with}{again}")


@contextlib.contextmanager
def ranks_stop_together() -> Iterator[LauncherStop]:
    """Around `launch_ranks(..., signals_to_handle=ELASTIC_SIGNALS)`: the ranks learn where to report, the launcher
    counts presses."""
    with tempfile.TemporaryDirectory(prefix="hpo-ranks-") as folder:
        stop = LauncherStop(Path(folder) / "stopped.json")
        os.environ[STOP_REPORT_ENV] = str(stop.report)  # the ranks inherit the launcher's environment
        previous = signal.signal(signal.SIGINT, stop.on_sigint)
        ELASTIC_LOG.addFilter(_not_a_stopped_rank)
        try:
            yield stop
        finally:
            ELASTIC_LOG.removeFilter(_not_a_stopped_rank)
            signal.signal(signal.SIGINT, previous)
            os.environ.pop(STOP_REPORT_ENV, None)


def _not_a_stopped_rank(record: logging.LogRecord) -> bool:
    """torch elastic logs a rank that exits 130 as "failed"; a rank that stopped on Ctrl-C did as it was asked."""
    return f"(exitcode: {Interrupted.exit_code})" not in record.getMessage()


def under_stopping_launcher() -> bool:
    """True in a rank started by `hpo train --nproc N`, which handles Ctrl-C as described above."""
    return STOP_REPORT_ENV in os.environ


def report_stop(message: str, checkpoint: str | None, wait_s: float = 5.0) -> None:
    """In a rank under the launcher: rank 0 writes what was saved (atomically: the launcher may read it at once). The
    other ranks wait for that file before they leave: torch elastic terminates the ranks still running as soon as one
    has exited, which could cut rank 0 off before its report."""
    report = Path(os.environ[STOP_REPORT_ENV])
    if os.environ.get("RANK", "0") == "0":
        partial = report.with_suffix(".partial")
        partial.write_text(json.dumps({"message": message, "checkpoint": checkpoint}))
        partial.replace(report)
        return
    deadline = time.monotonic() + wait_s
    while not report.exists() and time.monotonic() < deadline:
        time.sleep(0.02)


def _read_report(report: Path) -> dict[str, Any] | None:
    try:
        return json.loads(report.read_text())
    except (OSError, ValueError):
        return None
