"""The experiment store's contract, run against every backend (SQLite always; PostgreSQL when CI starts one)."""

from __future__ import annotations

import sqlite3

import pytest

from hpo.errors import ConfigError
from hpo.tracking.store import open_store

BACKENDS = ["sqlite_store", pytest.param("postgres_store", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def store(request):
    return request.getfixturevalue(request.param)


def test_run_upserts_merge_columns(store, unique_study):
    run_id = f"{unique_study}/trial-3"
    store.upsert_run(
        run_id, kind="trial", study_name=unique_study, trial_number=3, params={"lr": 0.01}, status="running"
    )
    store.upsert_run(run_id, status="completed", objective=0.97, state={"global_step": 40})

    row = store.run(run_id)
    assert row["params"] == {"lr": 0.01}, "a later upsert must not erase earlier columns"
    assert (row["status"], row["objective"], row["state"]) == ("completed", 0.97, {"global_step": 40})
    assert [r["id"] for r in store.runs(study_name=unique_study)] == [run_id]


def test_metrics_events_and_artifacts_read_back(store, unique_study, tmp_path):
    run_id = f"{unique_study}/trial-0"
    store.add_metrics(run_id, 10, {"loss": 0.5, "learning_rate": 1e-3}, epoch=0.25)
    store.add_metrics(run_id, 20, {"loss": 0.25}, epoch=0.5)
    store.record_event(run_id, "evaluated", "", {"eval_accuracy": 0.9})
    checkpoint = tmp_path / "checkpoint-20"
    checkpoint.mkdir()
    (checkpoint / "model.safetensors").write_bytes(b"x" * 1000)

    store.add_artifact(run_id, "checkpoint", checkpoint, step=20)

    losses = [(m["step"], m["epoch"], m["value"]) for m in store.metrics(run_id, name="loss")]
    assert losses == [(10, 0.25, 0.5), (20, 0.5, 0.25)]
    assert store.events(run_id)[0]["data"] == {"eval_accuracy": 0.9}
    (artifact,) = store.artifacts(run_id)
    assert artifact["size"] == 1000 and len(artifact["sha256"]) == 64 and artifact["step"] == 20


def test_terminal_event_sets_status_and_identity(store, unique_study):
    run_id = f"{unique_study}/trial-7"
    store.record_event(run_id, "pruned", "pruned at step 30", {"step": 30})

    row = store.run(run_id)
    assert (row["status"], row["study_name"], row["trial_number"], row["kind"]) == (
        "pruned",
        unique_study,
        7,
        "trial",
    )
    assert row["ended_at"] is not None


def test_unknown_event_kind_and_column_are_refused(store, unique_study):
    with pytest.raises(ValueError, match="unknown event kind 'exploded'"):
        store.record_event(f"{unique_study}/trial-0", "exploded")
    with pytest.raises(ValueError, match="no column"):
        store.upsert_run(f"{unique_study}/trial-0", colour="red")


def test_sqlite_store_is_wal_with_busy_timeout(sqlite_store):
    assert sqlite_store.db.journal_mode == "wal"
    assert sqlite_store.db.execute("PRAGMA busy_timeout").fetchone()[0] >= 10_000


def test_sqlite_tables_and_columns_match_documented_schema(tmp_path):
    open_store(f"sqlite:///{tmp_path}/e.db").close()
    conn = sqlite3.connect(tmp_path / "e.db")
    columns = {
        t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")] for t in ("hpo_runs", "hpo_metrics")
    }
    assert columns["hpo_metrics"] == ["run_id", "step", "epoch", "name", "value", "time"]
    assert columns["hpo_runs"][:4] == ["id", "kind", "study_name", "trial_number"]


def test_unsupported_store_url_is_a_config_error():
    with pytest.raises(ConfigError, match="unsupported URL"):
        open_store("mysql://localhost/db")
