"""The plain `postgresql://` URL a user gives hpo is the one their other tools take: hpo writes a study through it, and
Optuna's own `load_study` (SQLAlchemy's default driver for that URL, psycopg 3) reads it back unchanged."""

from __future__ import annotations

import uuid

import optuna
import pytest
from study_task import write_study

from hpo.spec import load_study_spec
from hpo.storage.study_db import open_study
from hpo.storage.urls import with_postgres_driver

pytestmark = pytest.mark.postgres


def test_optuna_load_study_reads_what_hpo_wrote_on_the_plain_url(tmp_path, postgres_url):
    assert postgres_url.startswith("postgresql://")
    assert with_postgres_driver(postgres_url) == postgres_url  # psycopg 3 installed: the URL is left as given
    name = f"plain-{uuid.uuid4().hex[:8]}"
    spec = load_study_spec(write_study(tmp_path, study={"name": name, "storage": postgres_url}))
    study = open_study(spec)
    trial = study.ask({"learning_rate": optuna.distributions.FloatDistribution(1e-4, 0.1, log=True)})
    study.tell(trial, 0.75)

    loaded = optuna.load_study(
        study_name=name, storage=postgres_url
    )  # Optuna alone, the URL as the user wrote it
    assert [t.value for t in loaded.trials] == [0.75]
    assert loaded.direction == optuna.study.StudyDirection.MAXIMIZE
