"""A PBT member at an interval trains on in place when the interval's decisions can be taken at once and leave it as it
is; it waits while the members it needs train, and pauses as before when one of them needs a slot. The decisions are
the claim's own (the same function, the same seeds), taken once, whoever takes them."""

from __future__ import annotations

import socket
import subprocess
import sys

import optuna
from optuna.trial import TrialState

from hpo.scheduling.pbt import DECIDED, WAITING, PbtPlan, adopt, population
from hpo.scheduling.pbt_in_place import judge, slot_needed
from hpo.spec.pbt import PbtSchedulerSpec
from hpo.spec.search_space import ParamSpec
from hpo.storage import pause
from hpo.storage.lineage import MEMBER, segments
from hpo.storage.study_db import ask_new
from trainer.checkpoint import STATE_FILE, checkpoint_dir

SPACE = {"learning_rate": ParamSpec(type="float", low=1e-4, high=0.5, log=True)}


def plan(members: int) -> PbtPlan:
    scheduler = PbtSchedulerSpec(
        type="pbt",
        population=members,
        perturbation_interval=4,
        max_resource=12,
        quantile_fraction=0.25,
        resample_probability=0.0,
        mutations={"learning_rate": {"factors": [0.5, 2.0]}},
    )
    return PbtPlan(scheduler=scheduler, space=SPACE, maximize=True, metric="accuracy", seed=0)


def member(study: optuna.Study, folder, rate: float, score: float | None) -> optuna.Trial:
    """A running member with its checkpoint at step 4 on disk and, when given, its score there."""
    trial = ask_new(study)  # never a paused one, as a claim
    study._storage.set_trial_param(  # noqa: SLF001 - a fixed value, as the sampler would have drawn it
        trial._trial_id,  # noqa: SLF001
        "learning_rate",
        optuna.distributions.FloatDistribution(1e-4, 0.5, log=True).to_internal_repr(rate),
        optuna.distributions.FloatDistribution(1e-4, 0.5, log=True),
    )
    trial.set_user_attr(MEMBER, trial.number)
    run_dir = folder / f"trial-{trial.number}"
    trial.set_user_attr("run_dir", str(run_dir))
    saved = checkpoint_dir(run_dir, 4)
    saved.mkdir(parents=True)
    (saved / STATE_FILE).write_text(f'{{"member": {trial.number}}}')
    if score is not None:
        trial.report(score, 4)
    return trial


def paused(study: optuna.Study, trial: optuna.Trial, folder) -> None:
    checkpoint = str(checkpoint_dir(folder / f"trial-{trial.number}", 4))
    assert pause.pause_trial(study, trial._trial_id, step=4, checkpoint=checkpoint, value=None)  # noqa: SLF001


def waiting(study: optuna.Study, trial: optuna.Trial) -> None:
    study._storage.set_trial_system_attr(trial._trial_id, WAITING, 4)  # noqa: SLF001


def new_study(tmp_path) -> optuna.Study:
    return optuna.create_study(storage=f"sqlite:///{tmp_path / 'study.db'}", direction="maximize")


def test_the_last_member_to_arrive_decides_and_trains_on_when_it_is_kept(tmp_path):
    study = new_study(tmp_path)
    worse = member(study, tmp_path, 0.01, 0.5)
    paused(study, worse, tmp_path)
    better = member(study, tmp_path, 0.02, 0.9)
    waiting(study, better)
    assert judge(study, plan(2), better.number, 4) is True
    trials = {t.number: t for t in study.get_trials()}
    assert trials[better.number].state == TrialState.RUNNING
    for number in (worse.number, better.number):
        assert trials[number].system_attrs[DECIDED] == [4]  # both decided at once, as a claim would
    copied = segments(trials[worse.number])[-1]
    # The worse one copies the better one's checkpoint.
    assert (copied.step, copied.source) == (4, better.number)
    copy = checkpoint_dir(tmp_path / f"trial-{worse.number}", 4) / STATE_FILE
    assert copy.read_text() == f'{{"member": {better.number}}}'


def test_an_exploited_member_pauses_with_the_copy_in_its_own_folder(tmp_path):
    study = new_study(tmp_path)
    better = member(study, tmp_path, 0.02, 0.9)
    paused(study, better, tmp_path)
    worse = member(study, tmp_path, 0.01, 0.5)
    waiting(study, worse)
    assert judge(study, plan(2), worse.number, 4) is False
    trial = study.get_trials()[worse.number]
    assert segments(trial)[-1].source == better.number and trial.system_attrs[DECIDED] == [4]
    copy = checkpoint_dir(tmp_path / f"trial-{worse.number}", 4) / STATE_FILE
    assert copy.read_text() == f'{{"member": {better.number}}}'


def test_it_waits_while_the_missing_scores_come_from_members_that_train(tmp_path):
    study = new_study(tmp_path)
    first = member(study, tmp_path, 0.01, 0.5)
    waiting(study, first)
    member(study, tmp_path, 0.02, None)  # running, not at step 4 yet
    assert judge(study, plan(2), first.number, 4) is None
    states, _ = population(study)
    # Seen as stopped at 4, to be decided there with the rest.
    assert [m.paused_at for m in states] == [4, None]


def test_it_pauses_when_a_member_it_needs_waits_for_a_slot(tmp_path):
    study = new_study(tmp_path)
    first = member(study, tmp_path, 0.01, 0.5)
    waiting(study, first)
    assert judge(study, plan(2), first.number, 4) is False  # the second member has not started: free the slot
    behind = member(study, tmp_path, 0.02, None)
    study._storage.set_trial_state_values(behind._trial_id, TrialState.WAITING)  # noqa: SLF001 - queued again
    assert judge(study, plan(2), first.number, 4) is False  # it needs a slot to get to step 4


def test_a_member_that_needs_a_slot_is_seen_without_the_lock_or_a_mark(tmp_path):
    """The read before the claim lock: pause at once, leaving nothing written, when another member waits for a slot;
    go on to the locked judgement when every member short of the interval trains now."""
    study = new_study(tmp_path)
    first = member(study, tmp_path, 0.01, 0.5)
    assert slot_needed(study, plan(2), 4) is True  # the second member has not started
    second = member(study, tmp_path, 0.02, None)
    assert slot_needed(study, plan(2), 4) is False  # it trains: it gets to step 4 without a slot
    study._storage.set_trial_state_values(second._trial_id, TrialState.WAITING)  # noqa: SLF001 - queued again
    assert slot_needed(study, plan(2), 4) is True
    assert WAITING not in study.get_trials()[first.number].system_attrs


def test_no_decision_while_a_member_that_scored_is_still_saving(tmp_path):
    """Decided without it, it would be decided alone later, copying a checkpoint its source may have dropped by then
    (it trained on in place past the interval and paused at the next one)."""
    study = new_study(tmp_path)
    first = member(study, tmp_path, 0.01, 0.5)
    waiting(study, first)
    member(study, tmp_path, 0.02, 0.9)  # scored at 4, its save not done yet
    assert judge(study, plan(2), first.number, 4) is None
    assert all(not t.system_attrs.get(DECIDED) for t in study.get_trials())


def test_a_member_whose_worker_ended_is_not_waited_for(tmp_path):
    """Left RUNNING by a killed `hpo run`, it is queued again only by a claim, which a worker waiting here on its own
    trial would never make: waiting for it would never end."""
    study = new_study(tmp_path)
    first = member(study, tmp_path, 0.01, 0.5)
    waiting(study, first)
    orphan = member(study, tmp_path, 0.02, None)
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    orphan.set_user_attr("worker", f"{socket.gethostname()}:{ended.pid}")
    assert judge(study, plan(2), first.number, 4) is False


def test_a_retry_of_a_member_never_copied_carries_its_values_before_it_samples(tmp_path):
    """Found by a killed run: a parked retry chosen as a source had no values yet (KeyError in explore)."""
    study = new_study(tmp_path)
    crashed = member(study, tmp_path, 0.02, 0.9)
    retry = ask_new(study)
    retry.set_user_attr("requeued_from_trial", crashed.number)
    adopt(study, retry._trial_id)  # noqa: SLF001
    states, _ = population(study)
    assert states[0].params_at(4) == {"learning_rate": 0.02}
