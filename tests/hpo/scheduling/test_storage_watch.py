"""`hpo run`'s live view reads the study's storage every second: a database that stops answering for a while (a
PostgreSQL restart) is said once and read again, never the end of the command (found by tests/chaos/campaign.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click
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
    assert len(pool.notices) == 1 and pool.notices[0].startswith("the study's storage does not answer (")
    # the root cause, not Optuna's wrapper ("An exception is raised during the commit"), and how long workers wait
    assert "exception is raised during the commit" not in pool.notices[0] or failing == "optuna"
    assert pool.notices[0].endswith("the workers wait for it, up to 15 min (storage.outage_timeout)")
    assert watch.read(lambda: 7) == 7
    assert pool.notices[1].startswith("the study's storage answers again (after ")


def test_other_errors_still_end_the_command():
    with pytest.raises(ZeroDivisionError):
        _StorageWatch(Notices()).read(lambda: 1 / 0)


def test_the_failure_is_sqlalchemys_operational_error(tmp_path):
    with pytest.raises(sqlalchemy.exc.OperationalError):
        unreachable_database(tmp_path)


def _storage_down() -> None:
    unreachable_database(Path(tempfile.mkdtemp()))


STORAGE_DOWN = click.Command("storage-down", callback=_storage_down)


def test_a_command_whose_storage_stops_answering_ends_in_one_line(capsys, monkeypatch):
    """After the live view, a command's last reads (retention, the summary) may meet the same outage: one line, exit 1,
    never a traceback of SQLAlchemy's connection pool."""
    from hpo.cli import app

    entry = next(iter(app.COMMANDS.values()))
    monkeypatch.setitem(app.COMMANDS, "storage-down", entry._replace(target=f"{__name__}:STORAGE_DOWN"))
    with pytest.raises(SystemExit) as stopped:
        app.main(["storage-down"])
    err = capsys.readouterr().err
    assert stopped.value.code == 1, err
    assert err.startswith(
        "error: the study's storage did not answer ((sqlite3.OperationalError) unable to open"
    )
    assert (
        err.rstrip().endswith("run the command again once it answers") and len(err.strip().splitlines()) == 1
    )


def test_only_a_storage_that_does_not_answer_is_taken_for_one():
    from hpo.cli.app import storage_unreachable

    assert storage_unreachable(optuna.exceptions.StorageInternalError("commit failed"))
    assert not storage_unreachable(ValueError("a bug"))
