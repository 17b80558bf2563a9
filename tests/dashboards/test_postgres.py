"""The dashboard on a PostgreSQL storage, with the experiment store in the same database (as `hpo run` lays it out)."""

from __future__ import annotations

import uuid

import optuna
import pytest
from dashboard_fixtures import answer

pytestmark = pytest.mark.postgres


def test_study_and_store_on_postgres_read_only(postgres_url):
    from dashboards.api import DashboardApi
    from dashboards.locate import store_beside
    from dashboards.optuna_source import OptunaSource
    from dashboards.store_reader import StoreReader
    from hpo.tracking.store import open_store

    name = f"dash-{uuid.uuid4().hex[:8]}"
    from hpo.storage.urls import with_postgres_driver as with_driver

    study = optuna.create_study(study_name=name, storage=with_driver(postgres_url))

    def objective(trial: optuna.Trial) -> float:
        x = trial.suggest_float("x", -1, 1)
        for step in range(3):
            trial.report(x * x + 1 / (step + 1), step)
        return x * x

    study.optimize(objective, n_trials=4)
    run_id = f"{name}/trial-0"
    store = open_store(postgres_url)
    store.upsert_run(
        run_id, kind="trial", study_name=name, trial_number=0, status="completed", params={"x": 0.5}
    )
    store.add_metrics(run_id, step=10, values={"loss": 0.7, "learning_rate": 1e-3}, epoch=1.0)
    store.close()

    assert store_beside(postgres_url) == postgres_url  # the store lives in the storage's database
    api = DashboardApi(OptunaSource(postgres_url), StoreReader(postgres_url))
    body = answer(api, "/api/study", {"name": name})
    assert len(body["trials"]) == 4 and body["summary"]["best"]["values"] == [pytest.approx(study.best_value)]
    run = answer(api, "/api/run", {"id": run_id})
    assert run["run"]["params"] == {"x": 0.5}
    assert run["metrics"]["loss"]["value"] == [pytest.approx(0.7)]

    watched = OptunaSource(postgres_url).study(name)
    with pytest.raises(optuna.exceptions.StorageInternalError) as refused:
        watched.set_user_attr("written_by_dashboard", True)
    assert "read-only transaction" in str(refused.value.__cause__)
