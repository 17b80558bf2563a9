"""Optuna's RDB storage whose every call rides out an outage (hpo.storage.outage): it waits for the database instead of
raising, up to `storage.outage_timeout`.

Each public method (and the private ones Optuna's cache and heartbeat checks call) is wrapped, so the storage stays an
RDBStorage: Optuna's `_CachedStorage`, its heartbeats and `isinstance` checks work as before.

A call tried again after its commit went through but its answer was lost must not take effect twice:
- intermediate values, attributes and heartbeats are upserts: writing them again changes nothing;
- `set_trial_state_values` (a trial's result) refused on the retry because the trial has already finished returns True
  when the stored state and values are the ones asked for: the first attempt wrote them;
- `_create_new_trial` (a claim's ask) may, in that narrow window, leave one extra RUNNING trial without a heartbeat;
  the workers' sweep for claimers that died before their first beat (hpo.storage.retry.fail_unbeaten_trials) queues
  it again, so no configuration is lost, but the sampler's point it held is drawn again.

`_create_new_trial` (which `create_new_trial` and Optuna's cache call) also creates only while the claim lock this
thread holds on PostgreSQL is still held (hpo.storage.claim_session). Optuna's cache calls `_create_new_trial` and
`_set_trial_param` directly, so both are wrapped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages import RDBStorage
from optuna.trial import FrozenTrial, TrialState

from hpo.storage.claim_session import confirm_held
from hpo.storage.outage import ride
from hpo.storage.sqlite_reads import ReadDeferredRDBStorage

# Every storage method a worker, a trial or `hpo run` reaches, directly or through Optuna's cache.
RIDDEN = (
    "create_new_study",
    "delete_study",
    "set_study_user_attr",
    "set_study_system_attr",
    "get_study_id_from_name",
    "get_study_name_from_id",
    "get_study_directions",
    "get_study_user_attrs",
    "get_study_system_attrs",
    "get_all_studies",
    "create_new_trial",
    "set_trial_param",
    "_set_trial_param",
    "get_trial_param",
    "set_trial_intermediate_value",
    "set_trial_user_attr",
    "set_trial_system_attr",
    "get_trial_user_attrs",
    "get_trial_system_attrs",
    "get_trial_id_from_study_id_trial_number",
    "get_trial",
    "get_all_trials",
    "_get_trials",
    "get_best_trial",
    "record_heartbeat",
    "_get_stale_trial_ids",
)


def _riding(base: type[RDBStorage], name: str) -> Callable[..., Any]:
    what = name.strip("_").replace("_", " ")
    parent = getattr(base, name)

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return ride(lambda: parent(self, *args, **kwargs), what)

    method.__name__ = name
    return method


def _state_values(base: type[RDBStorage]) -> Callable[..., bool]:
    """`set_trial_state_values` that counts a refusal after a lost answer as done when the trial holds what was asked."""

    def set_trial_state_values(
        self: RDBStorage, trial_id: int, state: TrialState, values: Sequence[float] | None = None
    ) -> bool:
        attempts = 0

        def call() -> bool:
            nonlocal attempts
            attempts += 1
            try:
                return base.set_trial_state_values(self, trial_id, state, values)
            except UpdateFinishedTrialError:
                if attempts > 1 and _landed(self, trial_id, state, values):
                    return True  # the attempt that seemed to fail was committed
                raise

        return ride(call, "record a trial's state")

    return set_trial_state_values


def _create_new_trial(base: type[RDBStorage]) -> Callable[..., FrozenTrial]:
    """`_create_new_trial` (what `create_new_trial` and Optuna's cache call) only while the claim lock this thread
    holds is still held (hpo.storage.claim_session)."""

    def _create_new_trial(
        self: RDBStorage, study_id: int, template_trial: FrozenTrial | None = None
    ) -> FrozenTrial:
        def call() -> FrozenTrial:
            confirm_held()
            return base._create_new_trial(self, study_id, template_trial)  # noqa: SLF001

        return ride(call, "create a trial")

    return _create_new_trial


def _landed(storage: RDBStorage, trial_id: int, state: TrialState, values: Sequence[float] | None) -> bool:
    stored = storage.get_trial(trial_id)
    return stored.state == state and (values is None or list(stored.values or []) == list(values))


def _riding_class(base: type[RDBStorage]) -> type[RDBStorage]:
    """A subclass of `base` with the same layout (an opened storage's class can be swapped for it), every method of
    RIDDEN riding out outages."""
    methods: dict[str, Any] = {name: _riding(base, name) for name in RIDDEN}
    methods["set_trial_state_values"] = _state_values(base)
    methods["_create_new_trial"] = _create_new_trial(base)
    methods["__doc__"] = f"{base.__name__} whose calls ride out a storage outage (hpo.storage.riding)."
    return type(f"Riding{base.__name__}", (base,), methods)


# PostgreSQL (and MySQL); SQLite, whose reads begin deferred (hpo.storage.sqlite_reads) and whose "database is
# locked" past the busy timeout is ridden out like a server's outage.
RidingRDBStorage = _riding_class(RDBStorage)
RidingSqliteStorage = _riding_class(ReadDeferredRDBStorage)


def make_riding(storage: RDBStorage) -> RDBStorage:
    """The opened `storage`, its calls riding out outages from now on (its class swapped, as `_make_immediate` does)."""
    storage.__class__ = (
        RidingSqliteStorage if isinstance(storage, ReadDeferredRDBStorage) else RidingRDBStorage
    )
    return storage
