"""Optuna's `RDBStorage._get_trials` in SQLAlchemy Core: the same trials, built from plain rows.

Every sampler, pruner and PBT or ASHA claim reads the study's unfinished trials (Optuna caches only finished ones), and
in a PBT study every member is unfinished all the time: a read per claim, per pause and per interval decision, several
per segment. Optuna's version builds ORM objects for each trial and each of its attributes, parameters and
intermediate values; about 7 ms for 8 PBT members with their records on a quiet machine. The same six queries in Core
(trials, then each child table for those trials) return tuples, about four times faster, and the FrozenTrials built
from them are equal field by field (tests/hpo/storage/test_trial_rows.py).
"""

from __future__ import annotations

import datetime
import json
from collections import defaultdict
from collections.abc import Container, Iterable
from typing import Any

import sqlalchemy
from optuna import distributions
from optuna.storages._rdb import models
from optuna.trial import FrozenTrial

_STUDIES = models.StudyModel.__table__
_TRIALS = models.TrialModel.__table__
_PARAMS = models.TrialParamModel.__table__
_VALUES = models.TrialValueModel.__table__
_USER = models.TrialUserAttributeModel.__table__
_SYSTEM = models.TrialSystemAttributeModel.__table__
_INTERMEDIATE = models.TrialIntermediateValueModel.__table__


# The order Optuna's reads return them in (through each table's unique index), so that dicts iterate alike.
_ORDER = {
    "trial_params": (_PARAMS.c.param_id,),
    "trial_values": (_VALUES.c.trial_id, _VALUES.c.objective),
    "trial_user_attributes": (_USER.c.trial_id, _USER.c.key),
    "trial_system_attributes": (_SYSTEM.c.trial_id, _SYSTEM.c.key),
    "trial_intermediate_values": (_INTERMEDIATE.c.trial_id, _INTERMEDIATE.c.step),
}


def read_trials(
    session: Any,
    study_id: int,
    states: Container[Any] | None,
    included_trial_ids: set[int],
    trial_id_greater_than: int,
) -> list[FrozenTrial]:
    """As `RDBStorage._get_trials(study_id, states, included_trial_ids, trial_id_greater_than)`, in `session`."""
    condition = _TRIALS.c.study_id == study_id
    if states is not None:
        assert isinstance(states, Iterable)
        condition = condition & _TRIALS.c.state.in_(list(states))
    included = {number for number in included_trial_ids if number <= trial_id_greater_than}
    if included and trial_id_greater_than > -1:
        newer = _TRIALS.c.trial_id > trial_id_greater_than
        condition = condition & sqlalchemy.or_(_TRIALS.c.trial_id.in_(sorted(included)), newer)
    elif trial_id_greater_than > -1:
        condition = condition & (_TRIALS.c.trial_id > trial_id_greater_than)
    trials = _trials_where(session, condition)
    if not trials:
        _raise_if_gone(session, study_id)
    return trials


def read_trial(session: Any, trial_id: int) -> FrozenTrial:
    """As `RDBStorage.get_trial(trial_id)`, in `session`: Optuna's `Trial.should_prune` hands the pruner a trial
    whose system attributes are read this way at their first use, at every report."""
    trials = _trials_where(session, _TRIALS.c.trial_id == trial_id)
    if not trials:
        raise KeyError(models.NOT_FOUND_MSG)
    return trials[0]


def _trials_where(session: Any, condition: Any) -> list[FrozenTrial]:
    """The trials that meet `condition`, by trial id, each with its parameters, values, attributes and reports."""
    trials = session.execute(sqlalchemy.select(_TRIALS).where(condition).order_by(_TRIALS.c.trial_id)).all()
    if not trials:
        return []
    chosen = sqlalchemy.select(_TRIALS.c.trial_id).where(condition).scalar_subquery()
    children = {table: _rows_of(session, table, chosen) for table in (_PARAMS, _VALUES, _USER, _SYSTEM)}
    intermediate = _rows_of(session, _INTERMEDIATE, chosen)
    return [_frozen(row, children, intermediate) for row in trials]


def _raise_if_gone(session: Any, study_id: int) -> None:
    """Optuna's error for a study that is gone. Asked only when no trial came back: a trial row names its study (a
    foreign key), so any row proves the study is there, and the ORM query this replaces was a fifth of a read."""
    found = session.execute(
        sqlalchemy.select(_STUDIES.c.study_id).where(_STUDIES.c.study_id == study_id)
    ).first()
    if found is None:
        raise KeyError(models.NOT_FOUND_MSG)


def _rows_of(session: Any, table: sqlalchemy.Table, chosen: Any) -> dict[int, list[Any]]:
    """The table's rows for the chosen trials, by trial id, in the order Optuna reads them."""
    statement = sqlalchemy.select(table).where(table.c.trial_id.in_(chosen)).order_by(*_ORDER[table.name])
    by_trial: dict[int, list[Any]] = defaultdict(list)
    for row in session.execute(statement):
        by_trial[row.trial_id].append(row)
    return by_trial


def _frozen(
    row: Any, children: dict[sqlalchemy.Table, dict[int, list[Any]]], intermediate: dict
) -> FrozenTrial:
    number = row.trial_id
    params = children[_PARAMS].get(number, [])
    parsed = {p.param_name: distributions.json_to_distribution(p.distribution_json) for p in params}
    return FrozenTrial(
        number=row.number,
        state=row.state,
        value=None,
        values=_values(children[_VALUES].get(number, [])),
        datetime_start=_local(row.datetime_start),
        datetime_complete=_local(row.datetime_complete),
        params={p.param_name: parsed[p.param_name].to_external_repr(p.param_value) for p in params},
        distributions=parsed,
        user_attrs={a.key: json.loads(a.value_json) for a in children[_USER].get(number, [])},
        system_attrs={a.key: json.loads(a.value_json) for a in children[_SYSTEM].get(number, [])},
        intermediate_values={
            v.step: models.TrialIntermediateValueModel.stored_repr_to_intermediate_value(
                v.intermediate_value, v.intermediate_value_type
            )
            for v in intermediate.get(number, [])
        },
        trial_id=number,
    )


def _values(rows: list[Any]) -> list[float] | None:
    if not rows:
        return None
    values: list[float] = [0.0] * len(rows)
    for value in rows:
        values[value.objective] = models.TrialValueModel.stored_repr_to_value(value.value, value.value_type)
    return values


def _local(utc: datetime.datetime | None) -> datetime.datetime | None:
    """Stored as naive UTC, shown as naive local time: what Optuna's TrialModel properties return."""
    if utc is None:
        return None
    return utc.replace(tzinfo=datetime.timezone.utc).astimezone().replace(tzinfo=None)
