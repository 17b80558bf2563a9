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


def test_a_workers_seed_does_not_depend_on_when_it_opened_the_study(tmp_path: Path) -> None:
    """`hpo run` counts the started trials once for all its workers: worker 1 draws the same points whether it opened
    the study before or after worker 0 started the enqueued point (it used to draw others when it came late, so a
    fresh run's points changed from run to run)."""
    spec = spec_with_one_enqueued_point(tmp_path)
    open_study(spec)
    url = str(spec.storage)

    def worker(index: int, started_before: int | None) -> optuna.Study:
        return open_worker_study(
            spec,
            url,
            worker_index=index,
            heartbeat_interval=10,
            grace_period=30,
            started_before=started_before,
        )

    early = worker(1, started_before=0)
    worker(0, started_before=0).ask()  # worker 0 starts the enqueued point
    late = worker(1, started_before=0)
    counted_late = worker(1, started_before=None)  # a restarted worker counts now: trial 0 has started
    rates = [drawn_rate(early), drawn_rate(late), drawn_rate(counted_late)]
    assert rates[0] == rates[1]
    assert rates[2] != rates[0]
