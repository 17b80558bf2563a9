"""An ASHA study with only a time limit: when its time is up, the paused trials that could not be promoted even if no
configuration came after them end PRUNED at their rung with their value; those the rule would still promote stay
paused, and a later `hpo run` promotes them."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState
from scheduler_support import run_hpo_to_end, study_url, trials
from study_task import write_study

from hpo.scheduling.asha import hopeless
from hpo.scheduling.promotion import AshaPlan, rung_table
from hpo.spec import load_study_spec
from hpo.storage import pause
from hpo.storage.database import create_storage

# The paper's rule (top floor(n / eta), nothing below eta trials): the first trials pause, so a 12 s limit ends with
# paused trials on a loaded machine too (hpo's default lets the first trial train to the end first).
ASHA = {
    "type": "asha",
    "min_resource": 4,
    "max_resource": 16,
    "reduction_factor": 2,
    "promote_underfilled": False,
}


def run(folder, *args):
    output = run_hpo_to_end(folder, "run", *args)
    return output


@pytest.mark.slow  # 15-21 s: the default suite stays near 10 minutes on 2 cores
def test_when_the_time_is_up_every_paused_trial_that_cannot_be_promoted_ends_pruned(tmp_path):
    path = write_study(
        tmp_path,
        study={"timeout": 12, "scheduler": ASHA, "sampler": {"type": "random", "seed": 1}},
        training={"max_steps": 16},
        resources={"workers": 1},
    )
    run(tmp_path)
    found = trials(tmp_path)
    assert not [t.number for t in found if t.state == TrialState.RUNNING]
    paused = [t for t in found if pause.is_paused(t)]
    pruned = [t for t in found if t.state == TrialState.PRUNED]
    assert pruned, [(t.number, t.state) for t in found]  # the bottom of each rung: judged, not left waiting
    for trial in pruned:  # ended at the rung it paused at, with its value there
        step = trial.user_attrs["pruned_step"]
        assert trial.value == pause.boundaries(trial)[step]
    # What stays paused is the top of its rung, which the rule would still promote.
    plan = AshaPlan.of(load_study_spec(path))
    assert plan is not None
    study = optuna.load_study(study_name="test", storage=create_storage(study_url(tmp_path)))
    table = rung_table(study, plan)
    # Each one left paused could still be promoted with no new configuration: its rank is within the top of the most
    # trials that may yet reach its rung (those there now, and those alive below it).
    out = {t.number for t in hopeless(table, plan.eta, True, 0, plan.underfilled)}
    for trial in paused:
        assert trial.number not in out, (trial.number, table)
    configurations = [t for t in found if not t.user_attrs.get("requeued")]
    if paused:  # the next run continues them first: no trial is left paused once n_trials is reached
        run(tmp_path, "--n-trials", str(len(configurations)))
        final = {t.number: t for t in trials(tmp_path)}
        for trial in paused:
            again = final[trial.number]
            assert again.state in (TrialState.COMPLETE, TrialState.PRUNED), (trial.number, again.state)
            resumed = again.system_attrs.get(pause.RESUMED_AT) or []
            assert again.state == TrialState.PRUNED or pause.pause_info(trial)["step"] in resumed
        assert not [t for t in final.values() if pause.is_paused(t)]
