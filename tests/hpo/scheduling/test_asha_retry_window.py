"""ASHA's rule judges a rung while a crashed trial's retry is about to be queued (its process failed it and waits for
the claim lock to queue the retry): that configuration is still to come, and its value may push a paused trial into
the top of the rung (tests/chaos/campaign.py seed 160601: 6 configurations, eta 2, the rung's third pruned for good
in that window, then the retry's value came below it)."""

from __future__ import annotations

from optuna.trial import TrialState
from study_task import write_study

from hpo.scheduling.promotion import IN_PLACE, AshaPlan, _record_in_place, end_hopeless, rung_decider
from hpo.spec import load_study_spec
from hpo.storage import pause
from hpo.storage.study_db import ask_new, ask_queued, open_study, trial_id

ASHA = {"type": "asha", "min_resource": 4, "max_resource": 16, "reduction_factor": 2}
RUNG_VALUES = [0.797, 0.796, 0.648, 0.647, 0.742]  # trials 0-4 paused at step 4; trial 4 is the rung's third


def test_a_retry_not_yet_queued_still_counts_as_a_configuration_to_come(tmp_path):
    path = write_study(tmp_path, study={"n_trials": 6, "scheduler": ASHA}, training={"max_steps": 16})
    spec = load_study_spec(path)
    study, plan = open_study(spec), AshaPlan.of(spec)
    assert plan is not None
    for value in RUNG_VALUES:
        trial = ask_new(study)  # a new configuration (study.ask() would hand out a paused one)
        pause.record_boundary(study, trial_id(trial), 4, value)
        assert pause.pause_trial(study, trial_id(trial), step=4, checkpoint=str(tmp_path / "c"), value=value)
    crashed = ask_new(study)  # trial 5: failed as requeued by its process, which has not queued the retry yet
    storage = study._storage
    storage.set_trial_user_attr(trial_id(crashed), "requeued", True)
    storage.set_trial_state_values(trial_id(crashed), state=TrialState.FAIL)

    # Six configurations can reach the rung, so its top three (0, 1 and 4) may still go on; only 2 and 3 are out.
    assert end_hopeless(study, plan, 6) == [2, 3]
    states = {t.number: (t.state, pause.is_paused(t)) for t in study.get_trials()}
    assert states[4] == (TrialState.WAITING, True), states


def test_a_retry_goes_on_past_a_rung_its_configuration_was_promoted_from_in_place(tmp_path):
    """Promoted in place at step 4, the trial crashed later and its retry starts over (its checkpoints damaged): at
    step 4 the retry goes on, a promotion granted is not judged again, though the rung now holds better values
    (tests/chaos seed 56163: pruned at step 4, its configuration's top rung 8)."""
    path = write_study(tmp_path, study={"n_trials": 6, "scheduler": ASHA}, training={"max_steps": 16})
    spec = load_study_spec(path)
    study, plan = open_study(spec), AshaPlan.of(spec)
    assert plan is not None
    first = ask_new(study)
    _record_in_place(study, first, 4)  # promoted in place at its rung 4, then killed
    storage = study._storage
    storage.set_trial_user_attr(trial_id(first), "requeued", True)
    storage.set_trial_state_values(trial_id(first), state=TrialState.FAIL)
    study.enqueue_trial({}, user_attrs={"requeued_from_trial": first.number, "retry_count": 1})
    for value in (0.9, 0.8, 0.7):  # the rung fills with better values meanwhile
        other = ask_new(study)
        pause.record_boundary(study, trial_id(other), 4, value)
        assert pause.pause_trial(study, trial_id(other), step=4, checkpoint=str(tmp_path / "c"), value=value)
    retry = ask_queued(study, retries_only=True)
    assert retry is not None and retry.number == 1

    decide = rung_decider(study, retry, plan, tmp_path)
    assert decide(4, 0.5) is False  # it goes on: no pause at a rung already passed
    assert study._storage.get_trial(trial_id(retry)).system_attrs[IN_PLACE] == [4]
