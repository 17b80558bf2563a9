"""ASHA state lives in the study's database: a SIGKILLed `hpo run` loses no paused trial, two processes sharing the
database never promote one trial twice, and paused trials hold the checkpoint they resume from (and their best one),
none once they cannot go on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from optuna.trial import TrialState
from scheduler_support import kill_quietly, run_hpo_to_end, slow_study, start_hpo, trials, wait_for

from hpo.storage import pause
from hpo.storage.retention import checkpoints_in

# The paper's rule: nothing goes on below eta trials, so the first trials pause and a kill finds several paused.
ASHA = {
    "type": "asha",
    "min_resource": 4,
    "max_resource": 16,
    "reduction_factor": 2,
    "promote_underfilled": False,
}


def asha_slow_study(folder, n_trials, delay=0.05, **scheduler):
    return slow_study(
        folder,
        delay=delay,
        study={
            "n_trials": n_trials,
            "scheduler": {**ASHA, **scheduler},
            "sampler": {"type": "random", "seed": 1},
        },
        training={"max_steps": 16},
        resources={"workers": 2},
    )


def run_again_to_the_end(folder) -> None:
    """A second `hpo run` after a kill: it must finish the study and exit 0."""
    run_hpo_to_end(folder, "run")


def paused_now(folder):
    return [t for t in trials(folder) if pause.is_paused(t)]


def check_disk(folder, seen: dict[int, int]) -> None:
    """Each paused trial holds the checkpoint it resumes from (and its best one); a trial that ended PRUNED holds none."""
    for trial in trials(folder):
        run_dir = folder / "out" / f"trial-{trial.number}"
        held = checkpoints_in(run_dir)
        if pause.is_paused(trial):
            checkpoint = pause.checkpoint_of(trial)
            # The trial may be resumed between the two reads, and even pause again at its next rung: then it has
            # written checkpoints meanwhile. Only a trial paused at the same step in both reads is judged.
            again = next(t for t in trials(folder) if t.number == trial.number)
            if pause.is_paused(again) and pause.pause_info(again)["step"] == pause.pause_info(trial)["step"]:
                # With `objective: best` (the default) its best checkpoint stays too: it may complete scored there.
                best = again.user_attrs.get("best_checkpoint")
                kept = {checkpoint.name} | ({Path(best).name} if best else set())
                assert checkpoint.name in {p.name for p in held} and {p.name for p in held} <= kept, (
                    trial.number,
                    held,
                )
                seen[trial.number] = seen.get(trial.number, 0) + 1
        elif trial.state == TrialState.PRUNED:
            # The database says PRUNED first and the checkpoints go right after (the other order would leave a paused
            # trial without its checkpoint after a crash): a read between the two sees both. They must go soon after.
            deadline = time.monotonic() + 10
            while held and time.monotonic() < deadline:
                time.sleep(0.1)
                held = checkpoints_in(run_dir)
            assert held == [], (trial.number, held)


@pytest.mark.slow  # 15-21 s: the default suite stays near 10 minutes on 2 cores
def test_sigkill_of_hpo_run_loses_no_paused_trial_and_a_second_run_finishes(tmp_path):
    asha_slow_study(tmp_path, n_trials=8)
    first = start_hpo(tmp_path, "run")
    seen: dict[int, int] = {}
    try:
        paused_at_check: dict[int, int] = {}  # trial number -> the step it paused at

        def two_paused():
            check_disk(tmp_path, seen)
            paused_at_check.clear()
            paused_at_check.update({t.number: pause.pause_info(t)["step"] for t in paused_now(tmp_path)})
            return len(paused_at_check) >= 2

        wait_for(two_paused, timeout=120, what="two paused trials")
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
    finally:
        kill_quietly(first)
    assert seen  # the disk was checked while trials were paused
    at_kill = {t.number: pause.pause_info(t) for t in paused_now(tmp_path)}
    # Between the last check and the kill a paused trial may have been promoted (then it is a running trial the kill
    # stopped, and its retry resumes it) or ended for good where it paused (promotion.end_hopeless ends PRUNED at its
    # pause step a paused trial ASHA can never promote with the configurations still to come); none may vanish.
    by_number = {t.number: t for t in trials(tmp_path)}
    for number, step in paused_at_check.items():
        trial = by_number[number]
        promoted = trial.system_attrs.get(pause.RESUMED_AT)
        ended_where_paused = trial.state == TrialState.PRUNED and trial.user_attrs.get("pruned_step") == step
        assert number in at_kill or promoted or ended_where_paused, (number, trial.state, trial.user_attrs)
    assert at_kill
    for number, info in at_kill.items():
        assert (tmp_path / "out" / f"trial-{number}" / f"checkpoint-{info['step']}").is_dir()

    status = subprocess.run(  # what a user sees between the two runs
        [sys.executable, "-m", "hpo.cli", "status", str(tmp_path / "study.yaml")],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        timeout=120,
    )
    shown = status.stdout
    assert status.returncode == 0, status.stderr
    assert shown.count("PAUSED") == len(at_kill), shown
    assert "rungs (reduction factor 2)" in shown and "(paused)" in shown

    run_again_to_the_end(tmp_path)
    final = {t.number: t for t in trials(tmp_path)}
    for number, info in at_kill.items():  # every trial paused at the kill was judged again, none was lost
        trial = final[number]
        assert trial.state in (TrialState.COMPLETE, TrialState.PRUNED), (number, trial.state)
        assert trial.intermediate_values[info["step"]] == info["value"]
        resumed = trial.system_attrs.get(pause.RESUMED_AT) or []
        assert trial.state == TrialState.PRUNED or info["step"] in resumed
    assert not paused_now(tmp_path)
    configurations = [t for t in final.values() if not t.user_attrs.get("requeued")]
    assert len(configurations) == 8  # killed running trials were retried, not counted twice
    for trial in final.values():
        if trial.state == TrialState.PRUNED:
            assert checkpoints_in(tmp_path / "out" / f"trial-{trial.number}") == []


@pytest.mark.slow  # 15 s on 2 cores: run by .ci/run's slow suite
def test_two_processes_on_one_database_never_promote_a_trial_twice(tmp_path):
    asha_slow_study(tmp_path, n_trials=12, delay=0.02, continue_in_place=False)  # every promotion a resume
    runs = [start_hpo(tmp_path, "run"), start_hpo(tmp_path, "worker")]
    seen: dict[int, int] = {}
    try:
        wait_for(
            lambda: check_disk(tmp_path, seen) or all(r.poll() is not None for r in runs),
            timeout=300,
            what="both processes to finish",
        )
    finally:
        for run in runs:
            kill_quietly(run)
    outputs = [run.stdout.read() for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    final = trials(tmp_path)
    # A trial whose heartbeat aged on a busy machine is failed and retried from its checkpoint: not counted twice.
    configurations = [t for t in final if not t.user_attrs.get("requeued")]
    failed = {t.number: t.user_attrs.get("error") for t in configurations if t.state == TrialState.FAIL}
    assert {t.state for t in configurations} <= {TrialState.COMPLETE, TrialState.PRUNED}, failed
    for trial in final:
        resumed = trial.system_attrs.get(pause.RESUMED_AT) or []
        assert len(resumed) == len(set(resumed)), (trial.number, resumed)  # one resume per pause point
    assert sum(len(t.system_attrs.get(pause.RESUMED_AT) or []) for t in final) >= 1
    assert len(configurations) == 12
    assert seen


@pytest.mark.slow  # 15-21 s: the default suite stays near 10 minutes on 2 cores
def test_sigkill_while_trials_train_through_a_closed_rank_gate_loses_no_trial(tmp_path):
    # The default rung (the first evaluation: step 4 of 18) behind the correlation gate (`rank_gate: true`: 8 pairs),
    # closed for a 6-trial study: trials report at the rung and train on. A kill while one trains past the rung; the
    # next run retries it from its checkpoint and ends every configuration COMPLETE, none paused, none counted twice.
    slow_study(
        tmp_path,
        study={
            "n_trials": 6,
            "scheduler": {"type": "asha", "rank_gate": True},
            "sampler": {"type": "random", "seed": 1},
        },
        training={"max_steps": 18},
        resources={"workers": 2},
    )
    first = start_hpo(tmp_path, "run")
    try:

        def past_the_rung():
            return any(t.state == TrialState.RUNNING and 4 in pause.boundaries(t) for t in trials(tmp_path))

        wait_for(past_the_rung, timeout=120, what="a trial training past its rung")
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
    finally:
        kill_quietly(first)
    run_again_to_the_end(tmp_path)
    final = trials(tmp_path)
    configurations = [t for t in final if not t.user_attrs.get("requeued")]
    assert len(configurations) == 6 and {t.state for t in configurations} == {TrialState.COMPLETE}
    assert not paused_now(tmp_path)
    assert any(t.user_attrs.get("requeued_from_trial") is not None for t in final)  # the killed one, retried
    for trial in configurations:
        assert trial.user_attrs["global_step"] == 18
        # a retry that resumed past the rung reports no value there: its predecessor did
        assert 4 in pause.boundaries(trial) or trial.user_attrs.get("requeued_from_trial") is not None
