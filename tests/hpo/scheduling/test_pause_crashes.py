"""A trial killed at the one moment between its pause point's checkpoint and its pause (the checkpoint and the score are
written, the trial is not yet paused) is still judged at that point on its retry: ASHA ranks it at that rung, PBT takes
that interval's decision for it. The kill is a callback that SIGKILLs its own trial process right after that save."""

from __future__ import annotations

from optuna.trial import TrialState
from scheduler_support import run_hpo_to_end, trials
from study_task import write_study

from hpo.scheduling.pbt import DECIDED
from hpo.storage import pause
from hpo.storage.lineage import members
from hpo.tracking.store import open_store

ASHA = {
    "type": "asha",
    "min_resource": 4,
    "max_resource": 16,
    "reduction_factor": 2,
    "continue_in_place": False,
}
PBT = {
    "type": "pbt",
    "population": 3,
    "perturbation_interval": 4,
    "max_resource": 12,
    "quantile_fraction": 0.34,
    "resample_probability": 0.0,
    "mutations": {"learning_rate": {"factors": [0.5, 2.0]}},
}


def kill_after_save(folder, step):
    return [
        {"import": "study_task:KillOnceAfterSave", "args": {"step": step, "marker": str(folder / "killed")}}
    ]


def run_to_the_end(folder):
    output = run_hpo_to_end(folder, "run")
    assert (folder / "killed").exists(), "the kill hook never fired"
    return output


def chain_of(found, number):
    """The trial `number` and the retries that continue it, oldest first."""
    chain = [t for t in found if t.number == number]
    while True:
        retry = [t for t in found if t.user_attrs.get("requeued_from_trial") == chain[-1].number]
        if not retry:
            return chain
        chain.append(retry[0])


def retried_events(folder, number):
    """The trials that the experiment store says trial `number` continues (one "retried" event each)."""
    store = open_store(folder / "out" / "experiments.db")
    try:
        events = store.events(kind="retried")
        return [
            e["data"].get("requeued_from_trial") for e in events if e["data"].get("retry_trial") == number
        ]
    finally:
        store.close()


def test_asha_trial_killed_between_its_rung_save_and_its_pause_is_judged_at_that_rung(tmp_path):
    write_study(
        tmp_path,
        study={"n_trials": 4, "scheduler": ASHA, "sampler": {"type": "random", "seed": 1}},
        training={"max_steps": 16},
        resources={"workers": 1, "heartbeat_interval": 1, "grace_period": 3},
        callbacks=kill_after_save(tmp_path, 4),
        tracking={"store": True},  # the "retried" event checked below lives in the experiment store
    )
    run_to_the_end(tmp_path)
    found = trials(tmp_path)
    chain = chain_of(found, 0)  # trial 0 is the one killed at its step-4 save
    assert len(chain) == 2 and chain[0].state == TrialState.FAIL, [(t.number, t.state) for t in chain]
    retry = chain[-1]
    assert pause.boundaries(chain[0]) == {4: chain[0].intermediate_values[4]}  # scored there before the kill
    # Judged at rung 0 (step 4): either promoted from there (resumed at step 4) or ended there.
    judged_at_4 = 4 in (retry.system_attrs.get(pause.RESUMED_AT) or []) or (
        retry.state == TrialState.PRUNED and retry.user_attrs.get("pruned_step") == 4
    )
    assert judged_at_4, (retry.state, retry.system_attrs, retry.user_attrs.get("pruned_step"))
    if (
        retry.state == TrialState.COMPLETE
    ):  # it trained on from step 4: its first piece ran in a resumed process
        # found by tests/chaos/campaign.py: it recorded none
        assert retried_events(tmp_path, retry.number) == [0]
    configurations = [t for t in found if not t.user_attrs.get("requeued")]
    assert len(configurations) == 4
    assert {t.state for t in configurations} <= {TrialState.COMPLETE, TrialState.PRUNED}


def test_pbt_member_killed_between_its_interval_save_and_its_pause_gets_that_intervals_decision(tmp_path):
    write_study(
        tmp_path,
        study={"scheduler": PBT, "sampler": {"type": "random", "seed": 0}},
        training={"max_steps": None, "lr_scheduler_type": "linear"},
        search_space={"learning_rate": {"type": "float", "low": 1.0e-4, "high": 0.5, "log": True}},
        resources={"workers": 1, "heartbeat_interval": 1, "grace_period": 3},
        callbacks=kill_after_save(tmp_path, 4),
    )
    run_to_the_end(tmp_path)
    found = trials(tmp_path)
    grouped = members(found)
    assert len(grouped) == 3
    for member, chain in grouped.items():
        newest = chain[-1]
        assert newest.state == TrialState.COMPLETE, (member, [(t.number, t.state) for t in chain])
        # Every member got the decision of every interval, the killed one included.
        assert sorted(newest.system_attrs.get(DECIDED) or []) == [4, 8], (member, newest.system_attrs)
    killed = chain_of(found, 0)
    assert len(killed) >= 2 and killed[0].state == TrialState.FAIL
