"""What a stop (Ctrl-C, SIGTERM) left behind, in words for the user: the trials it stopped and the checkpoint the next
run resumes each from, or that nothing was saved.

A stopped trial is failed with `interrupted: true` and queued again (`hpo.storage.retry`); one killed outright (a
second Ctrl-C) is still RUNNING with its process gone, and the next run queues it the same way. Either way the next
run resumes it from its newest complete checkpoint, which is what the message names."""

from __future__ import annotations

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpo.storage.retry import owner_gone, resume_point


def finished_numbers(study: optuna.Study) -> set[int]:
    """The trials already finished, taken before a run starts: a stop cannot have stopped them."""
    return {t.number for t in study.get_trials(deepcopy=False) if t.state.is_finished()}


def stopped_trials(study: optuna.Study, finished_before: set[int]) -> list[FrozenTrial]:
    """Trials this run stopped: failed as interrupted since it began, or left RUNNING by a process of this host that
    has ended (killed)."""
    stopped = []
    for trial in study.get_trials(deepcopy=False):
        if trial.number in finished_before:
            continue
        if trial.state == TrialState.FAIL and trial.user_attrs.get("interrupted"):
            stopped.append(trial)
        elif trial.state == TrialState.RUNNING and owner_gone(trial):
            stopped.append(trial)
    return stopped


def describe_stop(study: optuna.Study, output_dir: str, finished_before: set[int]) -> str:
    """One sentence: which trials were stopped and what each saved, or that nothing was saved."""
    stopped = stopped_trials(study, finished_before)
    if not stopped:
        return "nothing was saved: no trial had started"
    saved, unsaved = [], []
    for trial in stopped:
        checkpoint = resume_point(trial, output_dir)
        if checkpoint is None:
            unsaved.append(str(trial.number))
        else:
            step = checkpoint.rstrip("/").rsplit("-", 1)[-1]
            saved.append(f"trial {trial.number} saved {checkpoint} (step {step})")
    if not saved:
        which = "trial " + unsaved[0] if len(unsaved) == 1 else "trials " + ", ".join(unsaved)
        return f"nothing was saved: {which} had no checkpoint yet and will start again from the beginning"
    parts = saved
    if unsaved:
        parts.append(f"trial{'s' if len(unsaved) > 1 else ''} {', '.join(unsaved)} had no checkpoint yet")
    return "; ".join(parts) + "; the next run resumes from there"
