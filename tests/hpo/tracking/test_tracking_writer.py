"""The background writer: batches rows, loses nothing from parallel processes, and never stalls or fails training."""

from __future__ import annotations

import multiprocessing
import time

import pytest

from hpo.storage import outage
from hpo.tracking.store import open_store
from hpo.tracking.writer import BackgroundWriter

ROWS_PER_WORKER = 3000


def _write_metrics(location: str, study: str, worker: int) -> None:
    writer = BackgroundWriter(lambda: open_store(location), batch_size=200, flush_interval=0.05)
    run_id = f"{study}/trial-{worker}"
    writer.submit("runs", {"id": run_id, "status": "running", "params": {"worker": worker}})
    for step in range(ROWS_PER_WORKER):
        writer.submit("metrics", {"run_id": run_id, "step": step, "name": "loss", "value": step})
        if step % 500 == 0:
            writer.submit("events", {"run_id": run_id, "time": time.time(), "kind": "evaluated"})
    writer.close()
    if writer.dropped:
        raise SystemExit(f"dropped {writer.dropped}: {writer.last_error}")


def _run_parallel_writers(location: str, study: str, n_workers: int = 4) -> None:
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_write_metrics, args=(location, study, w)) for w in range(n_workers)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(120)
    assert [p.exitcode for p in workers] == [0] * n_workers

    store = open_store(location)
    assert len(store.runs(study_name=None)) >= n_workers
    for worker in range(n_workers):
        run_id = f"{study}/trial-{worker}"
        assert [m["step"] for m in store.metrics(run_id)] == list(range(ROWS_PER_WORKER))
        assert len(store.events(run_id)) == ROWS_PER_WORKER // 500
        assert store.run(run_id)["params"] == {"worker": worker}
    store.close()


def test_parallel_worker_processes_lose_nothing(tmp_path, unique_study):
    _run_parallel_writers(str(tmp_path / "experiments.db"), unique_study)


@pytest.mark.postgres
def test_parallel_worker_processes_lose_nothing_on_postgres(postgres_url, unique_study):
    _run_parallel_writers(postgres_url, unique_study)


def test_flush_writes_everything_submitted(tmp_path):
    writer = BackgroundWriter(lambda: open_store(tmp_path / "e.db"), flush_interval=60)
    for step in range(10):
        writer.submit("metrics", {"run_id": "r", "step": step, "name": "loss", "value": 1.0})
    assert writer.flush(10)
    assert len(open_store(tmp_path / "e.db").metrics("r")) == 10
    writer.close()


def unreachable():
    return open_store("postgresql://nobody:wrong@127.0.0.1:1/none")  # refused, as a server that is restarting


def test_rows_wait_for_a_store_that_stops_answering_and_none_is_lost(tmp_path):
    back_at = time.monotonic() + 1.5

    def restarting():
        return unreachable() if time.monotonic() < back_at else open_store(tmp_path / "e.db")

    writer = BackgroundWriter(restarting, flush_interval=0.01, write_attempts=2)
    for step in range(100):
        assert writer.submit("metrics", {"run_id": "r", "step": step, "name": "loss", "value": 1.0}) is True
    writer.close(timeout=0.5)  # shorter than the outage: close waits for it, up to storage.outage_timeout

    assert writer.dropped == 0 and writer.written == 100
    assert [m["step"] for m in open_store(tmp_path / "e.db").metrics("r")] == list(range(100))


def test_a_store_down_past_the_outage_timeout_costs_rows_not_the_trial(monkeypatch):
    monkeypatch.setattr(outage.clock, "timeout", 1.0)
    writer = BackgroundWriter(unreachable, flush_interval=0.01, write_attempts=2)
    started = time.perf_counter()
    for step in range(100):
        assert writer.submit("metrics", {"run_id": "r", "step": step, "name": "loss", "value": 1.0}) is True
    submit_time = time.perf_counter() - started
    writer.close(timeout=10)

    assert submit_time < 0.1, "submitting must never wait for the store"
    assert writer.dropped == 100 and "OperationalError" in writer.last_error


def test_full_queue_drops_instead_of_blocking(tmp_path):
    class SlowStore:
        def write(self, batch):
            time.sleep(0.5)

        def close(self):
            pass

    writer = BackgroundWriter(SlowStore, max_pending=10, flush_interval=0.01)
    started = time.perf_counter()
    accepted = [
        writer.submit("metrics", {"run_id": "r", "step": i, "name": "x", "value": 0}) for i in range(100)
    ]
    assert time.perf_counter() - started < 0.1
    assert accepted.count(False) >= 80 and writer.dropped == accepted.count(False)
    writer.close(timeout=5)
