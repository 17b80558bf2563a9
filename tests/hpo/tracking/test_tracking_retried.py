"""A retry records "retried" in the experiment store once per attempt, whatever its pieces: a paused trial (ASHA, PBT)
resumes in new processes, and a piece killed before its writer flushed leaves nothing (found by bench/chaos.py: retries
with no "retried" event, their predecessors left "paused")."""

from __future__ import annotations

from hpo.tracking import RunInfo
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
