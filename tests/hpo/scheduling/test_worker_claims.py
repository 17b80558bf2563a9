"""The worker's claim and re-queue rules, on a real SQLite storage in this process."""

from __future__ import annotations

import datetime
import sqlite3
import threading
import time

import optuna
import pytest
from optuna.trial import TrialState

from hpo.scheduling.worker import WAIT, claim_trial, fail_unstarted, worker_identity
from hpo.storage.database import claim_lock, create_storage
from hpo.storage.retry import RetryPolicy, fail_running_trial, fail_stale_trials, requeue
from hpo.storage.study_db import ask_new


@pytest.fixture
def study(tmp_path):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = create_storage(f"sqlite:///{tmp_path / 'study.db'}", heartbeat_interval=1, grace_period=2)
    return optuna.create_study(study_name="s", storage=storage, sampler=optuna.samplers.RandomSampler(seed=0))


def _checkpoint(run_dir, step):
    folder = run_dir / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text("{}")
    return folder


def test_claims_stop_at_n_trials_and_wait_while_a_worker_still_runs_one(study, tmp_path):
    first = claim_trial(study, 2, tmp_path)
    second = claim_trial(study, 2, tmp_path)
    assert isinstance(first, optuna.Trial) and isinstance(second, optuna.Trial)
    second.set_user_attr("worker", "host:1")
    study.tell(first, 1.0)
    assert claim_trial(study, 2, tmp_path) == WAIT  # the running trial may crash and need its slot again
    study.tell(second, 2.0)
    assert claim_trial(study, 2, tmp_path) is None
    assert len(study.trials) == 2


def test_a_claimed_trial_names_its_worker_at_once(study, tmp_path):
    """A worker killed between its claim and its trial's start leaves a trial whose owner `hpo run` can tell is gone
    (it then queues it again), and that other workers wait for, instead of leaving it RUNNING."""
    claim_trial(study, 2, tmp_path)
    (claimed,) = study.get_trials(states=(TrialState.RUNNING,))
    assert claimed.user_attrs["worker"] == worker_identity()
    assert claim_trial(study, 1, tmp_path) == WAIT


def test_a_crashed_trial_is_queued_once_with_its_checkpoint_and_runs_first(study, tmp_path):
    policy = RetryPolicy(max_retries=1, output_dir=str(tmp_path))
    trial = claim_trial(study, 5, tmp_path)
    trial.suggest_float("lr", 1e-4, 1e-1, log=True)
    _checkpoint(tmp_path / "trial-0", 4)
    newest = _checkpoint(tmp_path / "trial-0", 12)
    assert fail_running_trial(study, trial._trial_id, "crashed: test", policy, counts_as_retry=True) == 0
    assert fail_running_trial(study, trial._trial_id, "crashed: again", policy, counts_as_retry=True) is None
    failed = study.trials[0]
    assert failed.state == TrialState.FAIL and failed.user_attrs == {
        "worker": worker_identity(),
        "error": "crashed: test",
        "requeued": True,
    }
    (waiting,) = study.get_trials(states=(TrialState.WAITING,))
    assert waiting.user_attrs["resume_from"] == str(newest)
    assert waiting.user_attrs["requeued_from_trial"] == 0 and waiting.user_attrs["retry_count"] == 1

    retry = claim_trial(study, 5, tmp_path)  # the queued retry comes before any new trial
    assert retry.number == 1 and retry.suggest_float("lr", 1e-4, 1e-1, log=True) == failed.params["lr"]
    assert fail_running_trial(study, retry._trial_id, "crashed: twice", policy, counts_as_retry=True) is None
    assert "not retried: resources.max_retries = 1 used" in study.trials[1].user_attrs["error"]
    assert not study.get_trials(states=(TrialState.WAITING,))


def test_an_interrupt_does_not_use_up_retries(study, tmp_path):
    policy = RetryPolicy(max_retries=0, output_dir=str(tmp_path))
    trial = claim_trial(study, 5, tmp_path)
    fail_running_trial(study, trial._trial_id, "interrupted at step 3", policy, counts_as_retry=False)
    (waiting,) = study.get_trials(states=(TrialState.WAITING,))
    assert waiting.user_attrs["retry_count"] == 0 and "resume_from" not in waiting.user_attrs


def test_a_trial_whose_heartbeat_stopped_is_failed_and_queued(study, tmp_path):
    import time

    trial = claim_trial(study, 5, tmp_path)  # claiming records a first heartbeat
    trial.set_user_attr("worker", "elsewhere:42")
    policy = RetryPolicy(max_retries=2, output_dir=str(tmp_path))
    assert fail_stale_trials(study, policy) == []  # still fresh
    time.sleep(3.2)  # grace period 2 s
    assert fail_stale_trials(study, policy) == [0]
    failed = study.trials[0]
    assert (
        failed.user_attrs["error"] == "crashed: no heartbeat from worker elsewhere:42 within the grace period"
    )
    assert [t.state for t in study.trials] == [TrialState.FAIL, TrialState.WAITING]


def test_a_trial_queued_to_run_alone_after_an_oom_stays_alone_through_an_interrupt(study, tmp_path):
    policy = RetryPolicy(max_retries=0, output_dir=str(tmp_path))
    trial = claim_trial(study, 5, tmp_path)
    reason = "CUDA out of memory: ..., while sharing the GPU with 1 other trial(s): queued again"
    fail_running_trial(
        study, trial._trial_id, reason, policy, counts_as_retry=False, retry_attrs={"oom_retry": True}
    )
    retry = claim_trial(study, 5, tmp_path)
    assert retry.user_attrs["oom_retry"] is True and retry.user_attrs["retry_count"] == 0  # no retry used up
    fail_running_trial(study, retry._trial_id, "interrupted at step 3", policy, counts_as_retry=False)
    (waiting,) = study.get_trials(states=(TrialState.WAITING,))
    assert waiting.user_attrs["oom_retry"] is True and waiting.user_attrs["requeued_from_trial"] == 1


def _backdate(tmp_path, trial_id, seconds):
    """As if the trial had been created `seconds` ago (Optuna stamps datetime_start in local time)."""
    started = datetime.datetime.now() - datetime.timedelta(seconds=seconds)
    with sqlite3.connect(tmp_path / "study.db") as db:
        db.execute("UPDATE trials SET datetime_start = ? WHERE trial_id = ?", (str(started), trial_id))


def test_a_trial_whose_claimer_died_before_its_first_heartbeat_is_queued_again(study, tmp_path):
    """A whole-tree SIGKILL between creating a trial and its first heartbeat left it RUNNING for ever: Optuna's stale
    check skips a trial without a heartbeat, it had no owner to ask after, and with n_trials used up every later
    `hpo run` ended at once with "1 running" (tests/chaos/campaign.py seed 185304, 13 runs). Under the claim lock it is failed
    and queued again (the configuration never ran: no retry used up); one just created is left alone."""
    policy = RetryPolicy(max_retries=0, output_dir=str(tmp_path))
    orphan = ask_new(study)  # what claim_work creates for a new ASHA configuration, before its first beat
    _backdate(tmp_path, orphan._trial_id, 10)
    retry = claim_trial(study, 1, tmp_path, policy)
    assert isinstance(retry, optuna.Trial), retry
    first = study.trials[0]
    assert first.state == TrialState.FAIL and first.user_attrs["requeued"] is True
    assert retry.user_attrs["requeued_from_trial"] == 0 and retry.user_attrs["retry_count"] == 0
    fresh = ask_new(study)  # created a moment ago: its claimer may still be about to beat
    claim_trial(study, 5, tmp_path, policy)
    assert study.trials[fresh.number].state == TrialState.RUNNING


def test_a_trial_failed_as_requeued_whose_retry_never_came_is_queued_again(study, tmp_path):
    """A whole-tree SIGKILL between `fail_running_trial`'s FAIL and its enqueue lost the configuration: "trial 0 failed
    as requeued, but no retry continues it" (tests/chaos/campaign.py seed 37470). Under the claim lock the retry is queued then;
    a failure from a moment ago is left to the process that is about to queue it."""
    policy = RetryPolicy(max_retries=2, output_dir=str(tmp_path))
    trial = claim_trial(study, 1, tmp_path, policy)
    trial.suggest_float("lr", 1e-4, 1e-1, log=True)
    storage = study._storage
    storage.set_trial_user_attr(trial._trial_id, "requeued", True)
    storage.set_trial_user_attr(trial._trial_id, "error", "crashed: trial process killed by SIGKILL")
    storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL)  # and then the kill: no enqueue
    fresh = claim_trial(study, 5, tmp_path, policy)  # failed a moment ago: its process may still queue it
    assert "requeued_from_trial" not in fresh.user_attrs
    ended = datetime.datetime.now() - datetime.timedelta(seconds=10)
    with sqlite3.connect(tmp_path / "study.db") as db:
        db.execute(
            "UPDATE trials SET datetime_complete = ? WHERE trial_id = ?", (str(ended), trial._trial_id)
        )
    # A fresh process's view (this one's storage cache keeps the ended trial as it was).
    storage = create_storage(f"sqlite:///{tmp_path / 'study.db'}", heartbeat_interval=1, grace_period=2)
    study = optuna.load_study(study_name="s", storage=storage)
    retry = claim_trial(study, 5, tmp_path, policy)
    assert isinstance(retry, optuna.Trial), retry
    assert retry.user_attrs["requeued_from_trial"] == 0 and retry.user_attrs["retry_count"] == 1
    assert retry.suggest_float("lr", 1e-4, 1e-1, log=True) == study.trials[0].params["lr"]
    assert "requeued_from_trial" not in claim_trial(study, 5, tmp_path, policy).user_attrs  # queued once only


def test_a_worker_waits_for_a_retry_its_failing_process_never_queued(study, tmp_path):
    """A second Ctrl-C landed between `fail_running_trial`'s FAIL and its enqueue: the next `hpo run` found n_trials
    used up and nothing running, and ended at once with the configuration unfinished (.ci/run, the slow suite's
    test_a_second_ctrl_c_stops_everything_at_once). It waits instead, until the retry is queued after the grace."""
    policy = RetryPolicy(max_retries=2, output_dir=str(tmp_path))
    trial = claim_trial(study, 1, tmp_path, policy)
    study._storage.set_trial_user_attr(trial._trial_id, "requeued", True)  # noqa: SLF001
    study._storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL)  # noqa: SLF001 - then the kill
    assert claim_trial(study, 1, tmp_path, policy) == WAIT
    time.sleep(2.5)  # past the grace period (2 s)
    retry = claim_trial(study, 1, tmp_path, policy)
    assert isinstance(retry, optuna.Trial) and retry.user_attrs["requeued_from_trial"] == trial.number


def test_a_trial_failed_as_requeued_still_counts_until_its_retry_is_queued(study, tmp_path):
    """Between `fail_running_trial`'s FAIL and its enqueue another worker claimed a new configuration; the retry then
    found n_trials used up and stayed WAITING for ever (tests/chaos/campaign.py seed 186055, 12 runs that ended no trial)."""
    policy = RetryPolicy(max_retries=2, output_dir=str(tmp_path))
    trial = claim_trial(study, 1, tmp_path, policy)
    study._storage.set_trial_user_attr(trial._trial_id, "requeued", True)
    study._storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL)  # its enqueue comes next
    # No new configuration meanwhile: the worker waits for the retry.
    assert claim_trial(study, 1, tmp_path, policy) == WAIT
    requeue(study, study.trials[0], "crashed: test", policy, counts_as_retry=True)
    retry = claim_trial(study, 1, tmp_path, policy)
    assert retry.user_attrs["requeued_from_trial"] == 0


def test_a_trial_that_could_not_start_is_failed_unless_it_ended_meanwhile(study):
    """A worker stopped past the grace period found its claimed trial swept (FAIL, retry queued) as it went on: the
    error it met starting it must not end the worker too (tests/chaos/campaign.py seed 508)."""
    swept = study.ask()
    study._storage.set_trial_state_values(swept._trial_id, TrialState.FAIL)  # noqa: SLF001 - another worker's sweep
    fail_unstarted(study, swept, RuntimeError("Trial#0 has already finished"))
    fresh = study.ask()
    fail_unstarted(study, fresh, ValueError("a search space the sampler rejects"))
    first, second = study.get_trials()
    assert first.state == TrialState.FAIL and "error" not in first.user_attrs
    assert second.state == TrialState.FAIL
    assert second.user_attrs["error"] == "ValueError: a search space the sampler rejects"


def test_a_process_that_wakes_after_its_lost_retry_was_queued_does_not_queue_a_second(study, tmp_path):
    """Stopped (SIGSTOP) between failing its trial and queueing the retry, a process wakes after another worker
    queued that retry as lost: it queues none, or the second retry would wait for ever once the first ran the
    configuration (tests/chaos seed 989430: "nothing to run" with a retry left waiting)."""
    policy = RetryPolicy(max_retries=2, output_dir=str(tmp_path))
    trial = claim_trial(study, 1, tmp_path, policy)
    trial.suggest_float("lr", 1e-4, 1e-1, log=True)
    storage = study._storage
    storage.set_trial_user_attr(trial._trial_id, "requeued", True)
    storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL)  # then stopped
    ended = datetime.datetime.now() - datetime.timedelta(seconds=10)
    with sqlite3.connect(tmp_path / "study.db") as db:
        db.execute(
            "UPDATE trials SET datetime_complete = ? WHERE trial_id = ?", (str(ended), trial._trial_id)
        )
    other = create_storage(f"sqlite:///{tmp_path / 'study.db'}", heartbeat_interval=1, grace_period=2)
    assert (
        claim_trial(optuna.load_study(study_name="s", storage=other), 5, tmp_path, policy).user_attrs[
            "requeued_from_trial"
        ]
        == 0
    )  # another worker queued the lost retry, and claimed it
    failed = storage.get_trial(trial._trial_id)
    assert requeue(study, failed, "crashed", policy, counts_as_retry=True) is None  # the stopped one wakes
    retries = [t for t in study.get_trials() if t.user_attrs.get("requeued_from_trial") == 0]
    assert len(retries) == 1


def test_a_retry_waits_for_the_claim_lock_and_is_not_queued_twice(study, tmp_path):
    """The check for an existing retry and the enqueue are one step under the claim lock: a process queueing a retry
    while another holds the lock (and queues the same retry in it) waits for it, then queues none."""
    policy = RetryPolicy(max_retries=2, output_dir=str(tmp_path))
    trial = claim_trial(study, 1, tmp_path, policy)
    trial.suggest_float("lr", 1e-4, 1e-1, log=True)
    storage = study._storage
    storage.set_trial_user_attr(trial._trial_id, "requeued", True)
    storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL)
    failed = storage.get_trial(trial._trial_id)
    results: list[int | None] = []
    with claim_lock(storage, "s", tmp_path):  # another worker's sweep, in this thread
        waiting = threading.Thread(
            target=lambda: results.append(requeue(study, failed, "crashed", policy, counts_as_retry=True))
        )
        waiting.start()
        waiting.join(timeout=1.5)
        assert waiting.is_alive() and not results  # it waits for the lock
        assert (
            requeue(study, failed, "lost", policy, counts_as_retry=True) == 0
        )  # re-entrant: the holder queues
    waiting.join(timeout=30)
    assert results == [None]
    retries = [t for t in study.get_trials() if t.user_attrs.get("requeued_from_trial") == 0]
    assert [t.user_attrs["retry_reason"] for t in retries] == ["lost"]
