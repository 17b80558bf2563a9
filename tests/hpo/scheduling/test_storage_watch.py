"""`hpo run`'s live view reads the study's storage every second: a database that stops answering for a while (a
PostgreSQL restart) is said once and read again, never the end of the command (found by bench/chaos.py)."""

from __future__ import annotations

import optuna
import pytest
import sqlalchemy
import sqlalchemy.exc

from hpo.scheduling.pool import _StorageWatch


class Notices:
    def __init__(self) -> None:
        self.notices: list[str] = []


def unreachable_database(tmp_path) -> None:
    """What a query to a stopped PostgreSQL raises through SQLAlchemy: a real OperationalError (here SQLite's)."""
    engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'no-such-folder' / 'db.sqlite'}")
    with engine.connect() as connection:
        connection.execute(sqlalchemy.text("select 1"))


@pytest.mark.parametrize("failing", ["sqlalchemy", "optuna"])
def test_a_storage_that_stops_answering_is_said_once_and_read_again(tmp_path, failing):
    pool = Notices()
    watch = _StorageWatch(pool)

    def down() -> None:
        if failing == "optuna":
            raise optuna.exceptions.StorageInternalError("An exception is raised during the commit.")
        unreachable_database(tmp_path)

    assert watch.read(down) is None and watch.read(down) is None
    assert len(pool.notices) == 1 and pool.notices[0].startswith("the study's storage did not answer (")
    assert watch.read(lambda: 7) == 7
    assert pool.notices[1].startswith("the study's storage answers again (after ")


def test_other_errors_still_end_the_command():
    with pytest.raises(ZeroDivisionError):
        _StorageWatch(Notices()).read(lambda: 1 / 0)


def test_the_failure_is_sqlalchemys_operational_error(tmp_path):
    with pytest.raises(sqlalchemy.exc.OperationalError):
        unreachable_database(tmp_path)
