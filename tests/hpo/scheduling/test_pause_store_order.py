"""What the experiment store says about a paused ASHA trial when the worker pausing it stalls, about a retry that
ends without ever running, and about a trial whose outcome came after it was failed; a PBT exploit from a damaged
checkpoint (all found by tests/chaos/campaign.py)."""

from __future__ import annotations

from types import SimpleNamespace

from optuna.trial import TrialState
from study_task import write_study

from hpo.scheduling import worker
from hpo.scheduling.pbt import DECIDED, take_decisions
from hpo.scheduling.pbt_population import Decision
from hpo.scheduling.promotion import AshaPlan, _record_pruned, end_hopeless
from hpo.spec import load_study_spec
from hpo.storage import pause
from hpo.storage.retry import RetryPolicy, fail_running_trial
from hpo.storage.study_db import open_study
from hpo.tracking.store import open_store
from hpo.trial.run import TrialOutcome

ASHA = {"type": "asha", "min_resource": 4, "max_resource": 16, "reduction_factor": 2}


def asha_study(tmp_path):
    path = write_study(
        tmp_path,
        study={"n_trials": 4, "scheduler": ASHA},
        training={"max_steps": 16},
        tracking={"store": True},
    )
    spec = load_study_spec(path)
    return spec, open_study(spec)


def test_the_worker_says_paused_in_the_store_before_another_can_resume_the_trial(tmp_path, monkeypatch):
    """A worker SIGSTOPped between marking the trial paused and its store event wrote "paused" after another worker had
    resumed and completed the trial: the store said "paused" for a COMPLETE trial (seed 182021)."""
    spec, study = asha_study(tmp_path)
    trial = study.ask()
    checkpoint = tmp_path / "out" / "trial-0" / "checkpoint-4"
    checkpoint.mkdir(parents=True)
    seen = []
    real_pause = worker.pause_trial

    def pause_trial(*args, **kwargs):  # the moment others may resume it
        with open_store(spec.store_url) as store:
            seen.append([e["kind"] for e in store.events(f"test/trial-{trial.number}")])
        return real_pause(*args, **kwargs)

    monkeypatch.setattr(worker, "pause_trial", pause_trial)
    outcome = SimpleNamespace(
        values=[0.5], user_attrs={"paused_step": 4, "paused_checkpoint": str(checkpoint)}
    )
    config = worker.WorkerConfig(spec=spec, storage_url="", slot=None, n_trials=4, deadline=None)
    assert worker._pause(study, trial, outcome, config) == "paused"
    assert seen == [["paused"]]


def test_a_retry_ended_at_its_predecessors_rung_without_running_records_what_it_continues(tmp_path):
    """A queued retry parked at the rung its predecessor reached, then ended PRUNED there, never ran a process: no
    "retried" event, and the predecessor's run stayed "running" (seed 185304)."""
    spec, study = asha_study(tmp_path)
    study.tell(study.ask(), state=TrialState.FAIL)  # trial 0, killed; its process never ended its store run
    with open_store(spec.store_url) as store:
        store.upsert_run("test/trial-0", status="running")
    study.enqueue_trial(
        {}, user_attrs={"requeued_from_trial": 0, "retry_reason": "crashed: killed", "retry_count": 1}
    )
    (parked,) = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    _record_pruned(study, AshaPlan.of(spec), parked, 0.5)
    with open_store(spec.store_url) as store:
        (event,) = store.events(f"test/trial-{parked.number}", kind="retried")
        assert event["data"]["requeued_from_trial"] == 0
        assert store.run("test/trial-0")["status"] == "failed"
        assert store.run(f"test/trial-{parked.number}")["status"] == "pruned"


def test_a_pbt_exploit_whose_source_checkpoint_is_gone_leaves_the_member_as_it_was(tmp_path):
    """The copy of a source member's checkpoint that a fault cut short raised under the claim lock: every worker died
    there at each try, and every later `hpo run` too (tests/chaos/campaign.py seed 367814, 13 runs)."""
    spec, study = asha_study(tmp_path)
    members = [
        study.ask(),
        study.ask(),
    ]  # both before either pauses: ask() hands out a paused (WAITING) trial
    for number, trial in enumerate(members):
        trial.suggest_float("learning_rate", 1e-4, 1e-1, log=True)
        checkpoint = tmp_path / "out" / f"trial-{number}" / "checkpoint-4"
        checkpoint.mkdir(parents=True)
        (checkpoint / "model.safetensors").write_bytes(b"")
        if number == 1:
            (checkpoint / "trainer_state.json").write_text("{}")  # the source, 0, lost its trainer_state.json
        assert pause.pause_trial(study, trial._trial_id, step=4, checkpoint=str(checkpoint), value=0.5)
    latest = {t.number: t for t in study.get_trials(deepcopy=False)}
    assert sorted(latest) == [0, 1], latest
    take_decisions(study, latest, [Decision(1, 4, 0, {"learning_rate": 0.01}, {"learning_rate": 0.01})])
    member = study.get_trials(deepcopy=False)[1]
    assert member.system_attrs.get(DECIDED) == [4]  # decided: it goes on with its own model and values


def test_the_store_hears_a_prune_before_the_database_ends_the_paused_trial(tmp_path, monkeypatch):
    """A worker killed between ending a hopeless paused trial PRUNED in the database and writing its store event left
    the store's run "paused" for a PRUNED trial (tests/chaos/campaign.py seed 714328: a kill_worker and a full disk)."""
    spec, study = asha_study(tmp_path)
    plan = AshaPlan.of(spec)
    trials = [study.ask(), study.ask()]  # both first: ask() would take a paused (WAITING) trial
    for trial, value in zip(trials, (0.9, 0.5), strict=True):  # eta 2: the second can never be promoted
        checkpoint = tmp_path / "out" / f"trial-{trial.number}" / "checkpoint-4"
        checkpoint.mkdir(parents=True)
        pause.record_boundary(study, trial._trial_id, 4, value)
        assert pause.pause_trial(study, trial._trial_id, step=4, checkpoint=str(checkpoint), value=value)
    seen = []
    real_end = pause.end_paused_trial

    def end_paused_trial(study, trial_id, state, value):  # the moment a kill would leave the store behind
        number = study._storage.get_trial(trial_id).number
        with open_store(spec.store_url) as store:
            seen.append((number, [e["kind"] for e in store.events(f"test/trial-{number}")]))
        return real_end(study, trial_id, state, value)

    monkeypatch.setattr(pause, "end_paused_trial", end_paused_trial)
    assert end_hopeless(study, plan, None, time_up=True) == [1]
    assert seen == [(1, ["pruned"])]
    assert study.trials[1].state == TrialState.PRUNED


def test_an_outcome_that_comes_after_the_trial_was_failed_leaves_its_run_failed(tmp_path):
    """A worker SIGSTOPped past the grace period and continued just as another worker swept its trial: the trial was
    FAIL with a retry queued, yet its process finished and wrote "completed" to the store (seed 308, PBT)."""
    spec, study = asha_study(tmp_path)
    trial = study.ask()
    run_id = f"test/trial-{trial.number}"
    with open_store(spec.store_url) as store:
        store.record_event(run_id, "completed", "objective 0.5")  # what the trial's process wrote, too late
    policy = RetryPolicy.of(spec)
    assert (
        fail_running_trial(study, trial._trial_id, "no heartbeat", policy, counts_as_retry=True) is not None
    )
    outcome = TrialOutcome(TrialState.COMPLETE, [0.5], None, None, {})
    config = worker.WorkerConfig(spec=spec, storage_url="", slot=None, n_trials=4, deadline=None)
    assert worker.finish(study, trial, worker.ChildResult(outcome), config) == "lost"
    worker._events.clear()  # the worker's store, kept open between events: closed with the test's folder
    with open_store(spec.store_url) as store:
        assert [r["status"] for r in store.runs(study_name="test") if r["trial_number"] == trial.number] == [
            "failed"
        ]
