"""Memory columns of the experiment store: a run's peaks land in hpo_runs.peak_gpu_memory / peak_rss, and a store
written before those columns existed gets them when it is opened, its rows intact."""

from __future__ import annotations

import sqlite3

from hpo.tracking import RunInfo
from hpo.tracking.store import open_store
from hpo.tracking.store.schema import ADDED_COLUMNS, TABLES
from hpo.tracking.store_callback import ExperimentStoreCallback
from trainer import TrainerControl, TrainerState, TrainingArguments

GiB = 1 << 30


def test_a_runs_memory_peaks_are_stored_in_their_columns(tmp_path):
    location = str(tmp_path / "experiments.db")
    run = RunInfo(kind="trial", study_name="s", trial_number=2, output_dir=str(tmp_path))
    callback = ExperimentStoreCallback(location, run)
    args, state, control = TrainingArguments(output_dir=str(tmp_path)), TrainerState(), TrainerControl()
    callback.on_train_begin(args, state, control)
    # What the Trainer sets before on_train_end on a CUDA run (trainer.memory.RunPeaks).
    state.peak_memory = {"cpu_rss": 900 << 20, "gpu_allocated": 3 * GiB, "gpu_reserved": 4 * GiB}
    callback.on_train_end(args, state, control)
    callback.finish("completed", [0.5])
    with open_store(location) as store:
        row = store.run("s/trial-2")
    assert (row["peak_gpu_memory"], row["peak_rss"]) == (4 * GiB, 900 << 20)


def test_a_store_from_before_the_memory_columns_gets_them_and_keeps_its_rows(tmp_path):
    path = tmp_path / "experiments.db"
    old_columns = [name for name in TABLES["hpo_runs"] if name not in ADDED_COLUMNS["hpo_runs"]]
    with sqlite3.connect(path) as conn:
        conn.execute(f"CREATE TABLE hpo_runs ({', '.join(old_columns)}, PRIMARY KEY (id))")
        conn.execute("INSERT INTO hpo_runs (id, status) VALUES ('s/trial-0', 'completed')")
    with open_store(path) as store:
        store.upsert_run("s/trial-1", status="completed", peak_rss=123)
        assert store.run("s/trial-0")["status"] == "completed" and store.run("s/trial-0")["peak_rss"] is None
        assert store.run("s/trial-1")["peak_rss"] == 123
