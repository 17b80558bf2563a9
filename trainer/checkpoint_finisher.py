"""A checkpoint's last stretch off the training thread: flush its files (fsync), rename it into place, rotate.

The training thread writes a checkpoint's files into `.checkpoint-<step>.tmp` (page cache: well under a millisecond for
a small model) and goes on with the next step; one background thread then fsyncs them, renames the folder to
`checkpoint-<step>` and rotates the older ones, in the order the saves came. The fsync is what costs (tens of
milliseconds on a busy disk, against 0.4 ms for the writes), and nothing on the training thread waits for it. A crash
at any moment leaves at most a temporary folder, which resume never picks, as with a synchronous save.

Whoever needs the checkpoint in place waits for it (`wait`): callbacks of `on_save` that do not say they can do without
it, the end of training, and the next save, so at most one checkpoint is in flight and a crash loses at most the save
under way, as with a synchronous save. A failure in the background is raised on the training thread at that wait.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor


class CheckpointFinisher:
    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = (
            None  # started at the first save: no thread in a process that forks
        )
        self._pending: dict[int, Future] = {}  # step -> its last stretch, in submission order

    @property
    def started(self) -> bool:
        """Whether a save was submitted yet (before the first one, nothing of this run is under way)."""
        return self._pool is not None

    def settle(self, step: int) -> None:
        """Wait for everything when `step` is still in flight (its temporary folder is about to be written again)."""
        if step in self._pending:
            self.wait()

    def submit(self, step: int, job: Callable[[], None]) -> None:
        self.settle(step)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint")
        self._pending[step] = self._pool.submit(job)

    def in_flight(self, step: int) -> bool:
        future = self._pending.get(step)
        return future is not None and not future.done()

    def wait(self, *, close: bool = False) -> None:
        """Until every submitted checkpoint is in place; raises the first failure among them. `close`: end the
        thread too (the end of a training run: a process that trains many runs keeps no idle thread per run)."""
        pending, self._pending = list(self._pending.values()), {}
        failure: BaseException | None = None
        for future in pending:
            error = future.exception()
            failure = failure or error
        if close and self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if failure is not None:
            raise failure
