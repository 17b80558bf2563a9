"""The claim lock on PostgreSQL lives in one server session. When that session ends inside the block (a server restart,
`pg_terminate_backend`), the block's other connections still answer once the server does, but the lock is gone and
another worker may hold it: a trial created then would exceed n_trials (tests/chaos seed 12209: a PBT study of 4
members ended with 5). Such a create fails instead, and the claim starts again from the lock."""

from __future__ import annotations

import uuid

import optuna
import pytest
from sqlalchemy import text

from hpo.storage.database import claim_lock, create_storage, unwrap_rdb
from hpo.storage.outage import is_unreachable
from hpo.storage.study_db import ask_new

pytestmark = pytest.mark.postgres


def _lock_holders(url_storage: optuna.storages.BaseStorage) -> list[int]:
    """The server pids of the sessions holding an advisory lock."""
    rdb = unwrap_rdb(url_storage)
    with rdb.engine.connect() as connection:
        rows = connection.execute(text("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"))
        return [row[0] for row in rows]


def _terminate(storage: optuna.storages.BaseStorage, pids: list[int]) -> None:
    with unwrap_rdb(storage).engine.connect() as connection:
        for pid in pids:
            connection.execute(text("SELECT pg_terminate_backend(:pid, 5000)"), {"pid": pid})


def test_no_trial_is_created_once_the_lock_session_has_ended(postgres_url, tmp_path):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    name = f"lock-{uuid.uuid4().hex[:8]}"
    storage = create_storage(postgres_url)
    study = optuna.create_study(study_name=name, storage=storage)
    other = create_storage(postgres_url)  # another worker's connections

    with claim_lock(storage, name, tmp_path):
        ask_new(study)  # held: created
        holders = _lock_holders(other)
        assert len(holders) == 1
        _terminate(other, holders)  # as a restart ends it; the storage's pooled connections are untouched
        with pytest.raises(Exception) as raised:
            ask_new(study)
        assert is_unreachable(raised.value), (
            raised.value
        )  # an outage: the worker's claim starts again from the lock
        assert len(study.get_trials()) == 1  # nothing created unlocked

    with claim_lock(storage, name, tmp_path):  # the claim starts again from the lock
        ask_new(study)
    assert [t.number for t in study.get_trials()] == [0, 1]
