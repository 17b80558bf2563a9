"""`resources.ranks_per_trial` / `resources.strategy`, the default threads per trial, and `callbacks:` in study and run
files: what the schema accepts, what it refuses (naming the field and the fix), and how slots read it."""

from __future__ import annotations

import copy

import pytest

from hpo.errors import ConfigError
from hpo.scheduling.slots import make_slots
from hpo.spec import ResourcesSpec, SpecError, parse_run_spec, parse_study_spec

TASK = {
    "model_init": "studies.tasks.digits:model_init",
    "data": "studies.tasks.digits:data",
    "compute_metrics": "studies.tasks.digits:compute_metrics",
}
STUDY = {
    "study": {"name": "s", "metric": "accuracy", "n_trials": 4},
    "task": TASK,
    "training": {"eval_strategy": "epoch", "num_train_epochs": 2},
    "search_space": {"learning_rate": {"type": "float", "low": 1e-4, "high": 1e-1, "log": True}},
}


def study(**sections) -> dict:
    data = copy.deepcopy(STUDY)
    for key, value in sections.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) and key in data else value
    return data


def refused(data: dict, parse=parse_study_spec) -> str:
    with pytest.raises(SpecError) as caught:
        parse(data, source="study.yaml")
    assert caught.value.exit_code == 2
    return str(caught.value)


# ---- ranks and strategy ----------------------------------------------------------------------------------------
def test_ranks_per_trial_makes_cpu_slots_of_that_many_ranks_with_threads_shared():
    spec = parse_study_spec(study(resources={"ranks_per_trial": 2}))
    assert spec.resources.ranks_per_trial == 2 and spec.resources.strategy == "ddp"
    (slot,) = make_slots(spec.resources, workers=1, cpu_count=2)
    assert (slot.ranks, slot.threads) == (2, 1)  # 2 cores shared by 2 ranks


def test_ranks_per_trial_must_be_positive_and_agree_with_gpus_per_trial():
    assert "resources.ranks_per_trial" in refused(study(resources={"ranks_per_trial": 0}))
    message = refused(study(resources={"ranks_per_trial": 2, "gpus_per_trial": 4}))
    assert "resources.ranks_per_trial: is 2 but gpus_per_trial is 4" in message
    assert parse_study_spec(study(resources={"ranks_per_trial": 2, "gpus_per_trial": 2})).resources.ranks == 2


def test_ranks_per_trial_on_gpus_without_gpus_per_trial_is_refused_when_slots_are_made():
    spec = parse_study_spec(study(resources={"ranks_per_trial": 2}))
    with pytest.raises(
        ConfigError, match=r"resources.ranks_per_trial: 2 ranks per trial.*set gpus_per_trial: 2"
    ):
        make_slots(spec.resources, available_gpus=[0, 1], cpu_count=8)


def test_strategy_is_checked_and_must_agree_with_training_strategy():
    assert "resources.strategy" in refused(study(resources={"strategy": "horovod"}))
    message = refused(
        study(resources={"ranks_per_trial": 2, "strategy": "fsdp"}, training={"strategy": "ddp"})
    )
    assert "resources.strategy: is fsdp but training.strategy is ddp" in message
    message = refused(study(resources={"ranks_per_trial": 2}, training={"strategy": "single"}))
    assert "training.strategy: single runs one rank, but each trial runs 2 ranks" in message
    spec = parse_study_spec(study(resources={"ranks_per_trial": 2, "strategy": "fsdp"}))
    assert spec.trial_strategy() == "fsdp"  # the ranks of each trial run FSDP
    spec = parse_study_spec(study(resources={"ranks_per_trial": 2}, training={"strategy": "deepspeed"}))
    assert spec.trial_strategy() is None  # training.strategy decides
    spec = parse_study_spec(
        study(resources={"ranks_per_trial": 2}, training={"fsdp_config": {"reshard_after_forward": True}})
    )
    assert spec.trial_strategy() is None  # auto: fsdp from its config
    fsdp_but_ddp = study(resources={"ranks_per_trial": 2, "strategy": "ddp"}, training={"fsdp_config": {}})
    assert "resources.strategy: is ddp but training.fsdp_config configures fsdp" in refused(fsdp_but_ddp)


def test_default_threads_share_the_cores_between_every_rank_that_runs_at_once():
    default = ResourcesSpec()
    assert default.threads_per_trial is None
    assert [s.threads for s in make_slots(default, workers=2, cpu_count=2)] == [1, 1]
    assert [s.threads for s in make_slots(default, workers=1, cpu_count=16)] == [16]
    assert [s.threads for s in make_slots(ResourcesSpec(ranks_per_trial=2), workers=3, cpu_count=16)] == [
        2,
        2,
        2,
    ]
    assert [s.threads for s in make_slots(default, workers=4, cpu_count=2)] == [1] * 4  # never 0
    assert [s.threads for s in make_slots(ResourcesSpec(threads_per_trial=3), workers=2, cpu_count=2)] == [
        3,
        3,
    ]
    assert "threads_per_trial" in (ResourcesSpec.__doc__ or "")


# ---- callbacks -----------------------------------------------------------------------------------------------------
def test_callbacks_entries_build_fresh_instances():
    from trainer import EarlyStoppingCallback

    spec = parse_study_spec(study(callbacks=[{"early_stopping": {"patience": 3, "threshold": 0.01}}]))
    first, second = spec.build_callbacks()[0], spec.build_callbacks()[0]
    assert isinstance(first, EarlyStoppingCallback) and first is not second
    assert (first.early_stopping_patience, first.early_stopping_threshold) == (3, 0.01)


def test_callbacks_import_entry_builds_the_class_with_its_args():
    spec = parse_study_spec(
        study(callbacks=[{"import": "trainer:EarlyStoppingCallback", "args": {"early_stopping_patience": 5}}])
    )
    (callback,) = spec.build_callbacks()
    assert callback.early_stopping_patience == 5
    bad = parse_study_spec(
        study(callbacks=[{"import": "trainer:EarlyStoppingCallback", "args": {"nope": 1}}])
    )
    with pytest.raises(ConfigError, match=r"callbacks.0.args: trainer:EarlyStoppingCallback refused them"):
        bad.build_callbacks()
    not_a_callback = parse_study_spec(study(callbacks=[{"import": "collections:OrderedDict"}]))
    with pytest.raises(ConfigError, match=r"callbacks.0.import: .*not a trainer.TrainerCallback"):
        not_a_callback.build_callbacks()


def test_callbacks_refusals_name_the_entry_and_the_fix():
    assert "callbacks.0: give exactly one of early_stopping" in refused(study(callbacks=[{}]))
    assert "callbacks.0.early_stopping.patience" in refused(
        study(callbacks=[{"early_stopping": {"patience": 0}}])
    )
    assert "callbacks.0.early_stopping.paitence" in refused(
        study(callbacks=[{"early_stopping": {"paitence": 2}}])
    )
    assert "callbacks.0.import" in refused(study(callbacks=[{"import": "not a path"}]))
    message = refused(
        study(
            callbacks=[{"early_stopping": {}}],
            training={"eval_strategy": "no"},
            study={"pruner": {"type": "none"}},
        )
    )
    assert "callbacks.0.early_stopping: needs evaluations during training" in message
    several = {"metrics": ["accuracy", "loss"], "metric": None, "directions": ["maximize", "minimize"]}
    message = refused(
        study(callbacks=[{"early_stopping": {}}], study={**several, "pruner": {"type": "none"}})
    )
    assert (
        "callbacks.0.early_stopping: needs a metric to watch; set training.metric_for_best_model" in message
    )


def test_run_files_take_callbacks_and_early_stopping_needs_a_metric_there():
    run = {"task": TASK, "training": {"eval_strategy": "epoch", "metric_for_best_model": "accuracy"}}
    spec = parse_run_spec({**run, "callbacks": [{"early_stopping": {"patience": 2}}]})
    assert spec.build_callbacks()[0].early_stopping_patience == 2
    no_metric = {"task": TASK, "training": {"eval_strategy": "epoch"}, "callbacks": [{"early_stopping": {}}]}
    assert "needs a metric to watch" in refused(no_metric, parse=parse_run_spec)


def test_in_process_refuses_a_multi_rank_trial(tmp_path):
    from study_task import write_study

    from hpo.study.manager import run_study

    path = write_study(tmp_path, study={"n_trials": 1}, resources={"ranks_per_trial": 2})
    with pytest.raises(ConfigError, match="resources.ranks_per_trial: 2 ranks per trial need a process each"):
        run_study(path, in_process=True, dry_run=False)
