"""A worker's stop requests: the signals a job scheduler sends every process of a job at once count as one stop."""

from __future__ import annotations

import signal

from hpo.scheduling.worker import StopRequests


def test_signals_at_the_same_moment_are_one_stop_and_a_later_one_is_the_second():
    stop = StopRequests()
    stop._on_signal(signal.SIGTERM, None)  # SLURM's SIGTERM to every process of the task
    stop._on_signal(signal.SIGTERM, None)  # the pool's forward of its own, a moment later
    assert stop.level == 1  # save and stop: not killed before its checkpoint
    stop.last_at -= StopRequests.same_stop_s  # a later, separate request
    stop._on_signal(signal.SIGTERM, None)
    assert stop.level == 2
