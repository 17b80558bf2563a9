"""Each worker's sampler seed: the file's seed for the first worker of a fresh study (its `enqueue:` points do not
shift it), other workers and later runs apart from it, so that no two draw the same points."""

from __future__ import annotations

from pathlib import Path

import optuna
from study_task import write_study

from hpo.spec import load_study_spec
from hpo.storage.study_db import open_study, open_worker_study


def drawn_rate(study: optuna.Study) -> float:
    """The learning rate the study's sampler draws for a new trial."""
    return study.ask().suggest_float("learning_rate", 1.0e-4, 0.1, log=True)


def spec_with_one_enqueued_point(tmp_path: Path):
    path = write_study(
        tmp_path,
        study={"sampler": {"type": "tpe", "seed": 0}, "enqueue": [{"learning_rate": 0.01}]},
    )
    return load_study_spec(path)


def test_the_first_worker_of_a_fresh_study_draws_what_the_file_seed_draws(tmp_path: Path) -> None:
    spec = spec_with_one_enqueued_point(tmp_path)
    open_study(spec)  # creates the study and queues the enqueued point
    worker = open_worker_study(
        spec, str(spec.storage), worker_index=0, heartbeat_interval=10, grace_period=30
    )
    reference = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0))
    reference.enqueue_trial({"learning_rate": 0.01})
    worker.ask(), reference.ask()  # the enqueued point, trial 0
    assert drawn_rate(worker) == drawn_rate(reference)


def test_workers_and_a_continued_run_draw_other_points(tmp_path: Path) -> None:
    spec = spec_with_one_enqueued_point(tmp_path)
    open_study(spec)
    url = str(spec.storage)
    first, second = (
        open_worker_study(spec, url, worker_index=index, heartbeat_interval=10, grace_period=30)
        for index in (0, 1)
    )
    first.ask()  # the enqueued point
    rates = [drawn_rate(first), drawn_rate(second)]
    continued = open_worker_study(spec, url, worker_index=0, heartbeat_interval=10, grace_period=30)
    rates.append(drawn_rate(continued))  # 3 trials have started: its seed moved on
    assert len(set(rates)) == 3, rates
