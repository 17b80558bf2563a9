"""A PBT study with only a time limit: when the time is up, the members paused at an interval end COMPLETE there with
the score of the checkpoint they hold, so the study has a best trial and its export reloads what was scored."""

from __future__ import annotations

import json
import math

import pytest
from optuna.trial import TrialState
from scheduler_support import trials
from study_task import write_study

from hpo.cli import main
from hpo.storage import pause
from hpo.storage.lineage import latest_by_member, member_scores, members, segments
from hpo.study import run_study

PBT = {
    "type": "pbt",
    "population": 4,
    "perturbation_interval": 4,
    "max_resource": 400,
    "quantile_fraction": 0.25,
    "resample_probability": 0.0,
    "mutations": {"learning_rate": {"factors": [0.5, 2.0]}},
}


@pytest.mark.slow  # 15-21 s: the default suite stays near 10 minutes on 2 cores
def test_when_the_time_is_up_paused_members_end_complete_with_the_score_they_hold(tmp_path):
    path = write_study(
        tmp_path,
        study={"scheduler": PBT, "sampler": {"type": "random", "seed": 0}, "n_trials": None, "timeout": 20},
        model={"delay": 0.05},
        training={"max_steps": None, "lr_scheduler_type": "linear"},
        search_space={"learning_rate": {"type": "float", "low": 1.0e-4, "high": 0.5, "log": True}},
        resources={"heartbeat_interval": 1, "grace_period": 3},
    )
    run_study(path, workers=2, dry_run=False)  # 4 members x 400 steps on 2 slots: far from done in 20 s
    found = trials(tmp_path)
    assert not [t.number for t in found if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    chains = members(found)
    latest = latest_by_member(found)
    assert len(latest) == 4
    ended = [t for t in latest.values() if t.user_attrs.get("ended_at_time_up") is not None]
    assert ended, [(t.number, t.state.name, t.user_attrs) for t in latest.values()]
    for trial in ended:
        step = trial.user_attrs["ended_at_time_up"]
        assert trial.state == TrialState.COMPLETE and step < PBT["max_resource"]
        copied = [s.source for s in segments(trial) if s.step == step and s.source is not None]
        holder = chains[copied[-1]] if copied else chains[trial.user_attrs.get("member", trial.number)]
        assert math.isclose(trial.value, member_scores(holder)[step])  # the score of the weights it holds
        assert trial.user_attrs["best_checkpoint"].endswith(f"checkpoint-{step}")
        assert not pause.is_paused(trial)
    with pytest.raises(SystemExit) as done:
        main(["export", str(path), "--out", str(tmp_path / "export")])
    assert done.value.code in (0, None)
    exported = json.loads((tmp_path / "export" / "hyperparameters.json").read_text())
    assert exported["schedule"]  # the winner's schedule up to where the time ran out
