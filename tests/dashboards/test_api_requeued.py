"""A trial queued again after running out of GPU memory beside others is not a failure: the study page and the overview
show it as requeued, apart from the trials that really failed. The study is written by hpo's own retry layer, as the
worker does after an OOM, on a real SQLite database."""

from __future__ import annotations

import optuna
from dashboard_fixtures import answer
from optuna.trial import TrialState

from dashboards.api import DashboardApi
from dashboards.optuna_source import OptunaSource
from dashboards.store_reader import StoreReader
from hpo.scheduling.gpu_gate import OOM_RETRY_ATTR
from hpo.storage.database import create_storage
from hpo.storage.retry import RetryPolicy, fail_running_trial
from hpo.storage.study_db import ask_new, trial_id

OOM = "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 2.00 GiB is free."


def test_a_trial_requeued_after_an_oom_counts_as_requeued_not_failed(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(study_name="oom", storage=create_storage(url), direction="maximize")
    done = ask_new(study)
    done.suggest_float("x", 0, 1)
    study.tell(done, 0.9)
    squeezed = ask_new(study)
    squeezed.suggest_float("x", 0, 1)
    fail_running_trial(  # as hpo.scheduling.worker.finish records an OOM beside other trials
        study,
        trial_id(squeezed),
        OOM,
        RetryPolicy(max_retries=None, output_dir=str(tmp_path)),
        counts_as_retry=False,
        extra_attrs={"oom_shared_with": [0]},
        retry_attrs={OOM_RETRY_ATTR: True},
    )
    retry = study.ask()  # claims the queued retry: its parameters come back on suggest
    assert retry.suggest_float("x", 0, 1) == squeezed.params["x"]
    study.tell(retry, 0.8)
    broken = ask_new(study)
    broken.suggest_float("x", 0, 1)
    study.tell(broken, state=TrialState.FAIL)

    api = DashboardApi(OptunaSource(url), StoreReader(None))
    body = answer(api, "/api/study", {"name": "oom"})
    states = {row["number"]: row["state"] for row in body["trials"]}
    assert states == {0: "COMPLETE", 1: "REQUEUED", 2: "COMPLETE", 3: "FAIL"}
    counts = {state: n for state, n in body["summary"]["states"].items() if n}
    assert counts == {"COMPLETE": 2, "REQUEUED": 1, "FAIL": 1}
    (overview,) = answer(api, "/api/studies", {})["studies"]
    assert {state: n for state, n in overview["states"].items() if n} == counts
