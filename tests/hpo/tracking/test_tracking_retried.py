"""A retry records "retried" in the experiment store once per attempt, whatever its pieces: a paused trial (ASHA, PBT)
resumes in new processes, and a piece killed before its writer flushed leaves nothing (found by tests/chaos/campaign.py: retries
with no "retried" event, their predecessors left "paused")."""

from __future__ import annotations

import threading
import time

from study_task import write_study

from hpo.scheduling.worker import claim_trial, record_retry_origin
from hpo.spec import load_study_spec
from hpo.storage.retry import RetryPolicy, fail_running_trial
from hpo.storage.study_db import open_study
from hpo.tracking import RunInfo
from hpo.tracking.run_info import origin_attrs
from hpo.tracking.store import open_store
from hpo.tracking.store_callback import ExperimentStoreCallback
from trainer import TrainerControl, TrainerState, TrainingArguments

ORIGIN = {"requeued_from_trial": 4, "retry_reason": "crashed: its process ended while the trial was running"}


def run_piece(tmp_path, location: str) -> None:
    """One process's piece of trial 5 (the retry of trial 4): its store callback from train begin to its pause."""
    run = RunInfo(kind="trial", study_name="s", trial_number=5, output_dir=str(tmp_path), origin=dict(ORIGIN))
    callback = ExperimentStoreCallback(location, run)
    args, state, control = TrainingArguments(output_dir=str(tmp_path)), TrainerState(), TrainerControl()
    callback.on_train_begin(args, state, control)
    callback.on_train_end(args, state, control)
    callback.finish("paused", [0.5])


def retried(location: str) -> list[dict]:
    with open_store(location) as store:
        return [
            (e["data"]["requeued_from_trial"], e["data"]["retry_trial"]) for e in store.events(kind="retried")
        ]


def test_each_piece_of_a_retry_leaves_one_retried_event(tmp_path):
    location = str(tmp_path / "experiments.db")
    for _ in range(3):  # the first piece, then two resumes from a pause
        run_piece(tmp_path, location)
    assert retried(location) == [(4, 5)]
    with open_store(location) as store:
        assert (
            store.run("s/trial-4")["status"] == "failed"
        )  # the predecessor, which died without ending itself


def test_a_piece_after_one_that_recorded_nothing_records_it(tmp_path):
    location = str(tmp_path / "experiments.db")
    open_store(location).close()  # the study's store exists; the first piece's event never reached it
    run_piece(tmp_path, location)  # a later piece (a resume from a pause) of the same attempt
    assert retried(location) == [(4, 5)]


def test_a_piece_killed_before_its_writer_flushed_has_recorded_its_retry(tmp_path):
    """The origin is written at train begin, not queued: SIGKILL before the writer's first flush left no "retried"
    event (tests/chaos/campaign.py: "retried events [None]" once the retry was itself queued again)."""
    location = str(tmp_path / "experiments.db")
    run = RunInfo(kind="trial", study_name="s", trial_number=5, output_dir=str(tmp_path), origin=dict(ORIGIN))
    # The writer never flushes by itself here: what is in the store came without it.
    callback = ExperimentStoreCallback(location, run, flush_interval=3600)
    args, state, control = TrainingArguments(output_dir=str(tmp_path)), TrainerState(), TrainerControl()
    callback.on_train_begin(args, state, control)
    try:
        assert retried(location) == [(4, 5)]  # in the store now: a SIGKILL here loses nothing of it
        with open_store(location) as store:
            assert store.run("s/trial-4")["status"] == "failed"
    finally:
        callback.writer.close(timeout=30)


def test_the_workers_retried_event_on_a_retry_does_not_stand_for_its_origin(tmp_path):
    """Trial 5, a retry of 4, was itself queued again: the worker's "retried" event on trial 5 names no trial it
    continues, so a later piece of trial 5 must still record its own."""
    location = str(tmp_path / "experiments.db")
    with open_store(location) as store:
        store.record_event("s/trial-5", "retried", "crashed; queued again to resume from its checkpoint", {})
    run_piece(tmp_path, location)
    with open_store(location) as store:
        linked = [e["data"].get("requeued_from_trial") for e in store.events("s/trial-5", kind="retried")]
    assert linked == [None, 4]


def test_a_retry_killed_before_its_training_began_has_recorded_its_retry(tmp_path):
    """The worker records a claimed retry's origin before the trial's process starts: a retry SIGKILLed while it loaded
    its data left no "retried" event and its predecessor "paused" (tests/chaos/campaign.py seed 995513, ASHA, kill_trial)."""
    spec = load_study_spec(write_study(tmp_path, study={"n_trials": 1}, tracking={"store": True}))
    study = open_study(spec)
    policy = RetryPolicy(max_retries=1, output_dir=str(tmp_path))
    crashed = claim_trial(study, 1, tmp_path)
    fail_running_trial(study, crashed._trial_id, "crashed: test", policy, counts_as_retry=True)
    retry = claim_trial(study, 1, tmp_path, policy)
    record_retry_origin(spec, study, retry)  # what the worker does before it forks; then the retry is killed
    with open_store(spec.store_url) as store:
        (event,) = store.events(f"test/trial-{retry.number}", kind="retried")
        assert event["data"]["requeued_from_trial"] == crashed.number
        assert store.run(f"test/trial-{crashed.number}")["status"] == "failed"
    record_retry_origin(spec, study, retry)  # again (a resumed piece): nothing more
    run_piece_of(tmp_path, spec, retry)  # and its store callback, had it lived: nothing more either
    with open_store(spec.store_url) as store:
        assert len(store.events(f"test/trial-{retry.number}", kind="retried")) == 1


def run_piece_of(tmp_path, spec, trial) -> None:
    run = RunInfo(
        kind="trial",
        study_name=spec.study.name,
        trial_number=trial.number,
        output_dir=str(tmp_path),
        origin=origin_attrs(trial.user_attrs),
    )
    callback = ExperimentStoreCallback(spec.store_url, run)
    args, state, control = TrainingArguments(output_dir=str(tmp_path)), TrainerState(), TrainerControl()
    callback.on_train_begin(args, state, control)
    callback.finish("completed", [0.5])


def test_a_retry_whose_store_is_restarting_writes_its_origin_once_it_answers(tmp_path, monkeypatch):
    """The worker wrote the origin; the trial's own check found the store down (a PostgreSQL restart) and queued a copy
    blindly: two "retried" events for one attempt (tests/chaos/campaign.py seed 977111). Now it asks again once it answers."""
    from hpo.tracking import store_callback

    location = str(tmp_path / "experiments.db")
    run = RunInfo(kind="trial", study_name="s", trial_number=5, output_dir=str(tmp_path), origin=dict(ORIGIN))
    assert store_callback.record_origin(location, run)  # the worker, before the trial's process started
    real_open, calls = store_callback.open_store, []

    def restarting(where):
        if threading.current_thread() is threading.main_thread() or calls:  # not the writer's own thread
            calls.append(where)
            if len(calls) == 1:
                raise ConnectionError("the server is restarting")
        return real_open(where)

    monkeypatch.setattr(store_callback, "open_store", restarting)
    monkeypatch.setattr(store_callback, "ORIGIN_RETRY_S", 0.01)
    run_piece(tmp_path, location)
    deadline = time.monotonic() + 10
    while len(calls) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    assert retried(location) == [(4, 5)]


def test_a_retry_swept_before_it_started_is_recorded_by_the_retry_after_it(tmp_path):
    """Trial 1, the retry of 0, was claimed by a worker that was then stopped past the grace period: swept before it
    recorded anything, queued again as trial 2. Trial 2 records both links, so trial 0's run is not left "paused"
    (tests/chaos/campaign.py seed 704, PBT, kill_run and stop_worker)."""
    spec = load_study_spec(write_study(tmp_path, study={"n_trials": 1}, tracking={"store": True}))
    study = open_study(spec)
    policy = RetryPolicy(max_retries=3, output_dir=str(tmp_path))
    first = claim_trial(study, 1, tmp_path)
    first.set_user_attr("pid", 1)  # it ran a process
    with open_store(spec.store_url) as store:
        store.record_event(f"test/trial-{first.number}", "paused", "paused at step 4")
    fail_running_trial(study, first._trial_id, "crashed: killed", policy, counts_as_retry=True)
    swept = claim_trial(study, 1, tmp_path, policy)  # its worker stopped here: no process, no record
    fail_running_trial(study, swept._trial_id, "crashed: no heartbeat", policy, counts_as_retry=True)
    last = claim_trial(study, 1, tmp_path, policy)
    record_retry_origin(spec, study, last)
    with open_store(spec.store_url) as store:
        assert store.run(f"test/trial-{first.number}")["status"] == "failed"
        links = {
            e["data"]["retry_trial"]: e["data"]["requeued_from_trial"] for e in store.events(kind="retried")
        }
    assert links == {swept.number: first.number, last.number: swept.number}
