"""Study files: objectives, search space, sampler and pruner, and every refusal that needs no training."""

from __future__ import annotations

import copy

import optuna
import pytest
import yaml

from hpo.errors import ConfigError
from hpo.spec import SpecError, StudySpec, load_spec, load_study_spec, parse_study_spec

TASK = {
    "model_init": "studies.tasks.digits:model_init",
    "data": "studies.tasks.digits:data",
    "compute_metrics": "studies.tasks.digits:compute_metrics",
}
STUDY = {
    "study": {"name": "s", "metric": "accuracy", "n_trials": 4},
    "task": TASK,
    "training": {"eval_strategy": "epoch", "num_train_epochs": 2},
    "search_space": {
        "learning_rate": {"type": "float", "low": 1e-4, "high": 1e-1, "log": True},
        "hidden_size": {"type": "int", "low": 16, "high": 64, "step": 16},
        "activation": {"type": "categorical", "choices": ["relu", "gelu"]},
        "dropout": {"type": "float", "low": 0.0, "high": 0.5, "when": {"activation": "gelu"}},
        "seed": {"type": "fixed", "value": 3, "target": "model"},
    },
}


def study(**changes) -> dict:
    """STUDY with dotted-path changes, e.g. study(**{"study.pruner": {"type": "none"}})."""
    data = copy.deepcopy(STUDY)
    for path, value in changes.items():
        node = data
        *parents, last = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return data


def problem(data: dict) -> tuple[str, str]:
    with pytest.raises(SpecError) as caught:
        parse_study_spec(data, source="study.yaml")
    assert len(caught.value.problems) == 1, caught.value.problems
    return caught.value.problems[0]


def test_valid_study_fills_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = parse_study_spec(STUDY)
    assert spec.study.metrics == ["eval_accuracy"] and spec.study.directions == ["maximize"]
    assert spec.study.metric == "eval_accuracy" and spec.study.direction == "maximize"
    # evaluation is on and there is one objective: what `scheduler: {type: asha}` runs, stop-type rungs
    assert spec.stops_at_rungs() and spec.pruning_label() == "asha stop-type rungs"
    assert spec.output_dir == str(tmp_path / "runs" / "s")
    assert spec.storage == f"sqlite:///{tmp_path}/runs/s/study.db"
    assert spec.store_url == str(tmp_path / "runs" / "s" / "experiments.db")
    assert spec.trial_dir(7) == str(tmp_path / "runs" / "s" / "trial-7")


def test_parameters_go_to_training_or_model():
    spec = parse_study_spec(study(model={"num_layers": 2}))
    targets = {name: p.target for name, p in spec.search_space.items()}
    assert targets == {
        "learning_rate": "training",
        "hidden_size": "model",
        "activation": "model",
        "dropout": "model",
        "seed": "model",
    }
    training, model = spec.split_params({"learning_rate": 0.01, "hidden_size": 32, "seed": 3})
    assert training == {"learning_rate": 0.01}
    assert model == {"num_layers": 2, "hidden_size": 32, "seed": 3}
    args = spec.training_arguments("/tmp/trial-0", **training)
    assert args.learning_rate == 0.01 and args.output_dir == "/tmp/trial-0" and args.num_train_epochs == 2


def test_loss_metrics_are_minimised_by_default():
    spec = parse_study_spec(study(**{"study.metric": "eval_loss"}))
    assert spec.study.directions == ["minimize"]


def test_no_metric_means_eval_loss():
    spec = parse_study_spec(study(**{"study.metric": None}))
    assert spec.study.metrics == ["eval_loss"] and spec.study.directions == ["minimize"]


def test_several_objectives():
    spec = parse_study_spec(
        study(
            **{
                "study.metric": None,
                "study.metrics": ["accuracy", "num_parameters"],
                "study.directions": ["maximize", "minimize"],
            }
        )
    )
    assert spec.study.is_multi_objective and spec.study.pruner.type == "none"
    assert spec.study.metrics == ["eval_accuracy", "eval_num_parameters"]


@pytest.mark.parametrize(
    ("changes", "path", "text"),
    [
        (
            {"search_space.learning_rate.low": 0},
            "search_space.learning_rate.low",
            "must be > 0 when log is true",
        ),
        ({"search_space.hidden_size.low": 128}, "search_space.hidden_size.low", "must be <= high"),
        ({"search_space.hidden_size.step": 0.5}, "search_space.hidden_size.step", "whole number"),
        (
            {"search_space.learning_rate.step": 0.01},
            "search_space.learning_rate.step",
            "cannot be combined with log",
        ),
        ({"search_space.activation.choices": []}, "search_space.activation.choices", "at least one value"),
        ({"search_space.activation.low": 1}, "search_space.activation.low", "not used by type categorical"),
        ({"search_space.seed.value": None}, "search_space.seed.value", "required for type fixed"),
        ({"search_space.hidden_size.type": "integer"}, "search_space.hidden_size.type", "did you mean int?"),
        ({"search_space.hidden_size.hgh": 3}, "search_space.hidden_size.hgh", "did you mean high?"),
        (
            {"search_space.dropout.when": {"activaton": "gelu"}},
            "search_space.dropout.when.activaton",
            "did you mean activation?",
        ),
        (
            {"search_space.dropout.when": {"activation": "silu"}},
            "search_space.dropout.when.activation",
            "never takes the value 'silu'",
        ),
        (
            {"search_space.warmup": {"type": "float", "low": 0, "high": 1, "target": "training"}},
            "search_space.warmup.target",
            "not a TrainingArguments field",
        ),
        (
            {"search_space.warmup_ratio": {"type": "float", "low": 0, "high": 2}},
            "search_space.warmup_ratio",
            "the value 2 makes the training arguments invalid: training.warmup_ratio: must be in [0, 1]",
        ),
        ({"study.sampler": {"type": "tpee"}}, "study.sampler.type", "did you mean tpe?"),
        (
            {"study.sampler": {"type": "tpe", "n_startup_trial": 3}},
            "study.sampler.n_startup_trial",
            "did you mean n_startup_trials?",
        ),
        ({"study.sampler": {"type": "tpe", "gamma": 3}}, "study.sampler.gamma", "unknown option"),
        ({"study.sampler": {"type": "grid"}}, "search_space.learning_rate.step", "grid sampler needs a step"),
        (
            {"study.pruner": {"type": "percentile", "percentile": 200}},
            "study.pruner.percentile",
            "between 0 and 100",
        ),
        (
            {"study.pruner": {"type": "patient", "wrapped": {"type": "median"}}},
            "study.pruner.patience",
            "required",
        ),
        (
            {"study.pruner": {"type": "median", "wrapped": {"type": "median"}}},
            "study.pruner.wrapped",
            "only a patient pruner",
        ),
        ({"study.n_trials": 0}, "study.n_trials", "greater than or equal to 1"),
        ({"study.objective": "max"}, "study.objective", "choose one of best, last"),
        ({"study.direction": "maximise"}, "study.direction", "did you mean maximize?"),
        (
            {"study.metrics": ["a", "b"]},
            "study.metrics",
            "metric (one objective) or metrics (several), not both",
        ),
        (
            {"study.metric": None, "study.metrics": ["a", "b"], "study.direction": "maximize"},
            "study.direction",
            "directions",
        ),
        (
            {"study.metric": None, "study.metrics": ["a", "b"], "study.directions": ["maximize"]},
            "study.directions",
            "one per metric",
        ),
        ({"study.storage": "notaurl"}, "study.storage", "not a database URL"),
        ({"study.storage": "oracle://x/y"}, "study.storage", "unsupported database"),
        (
            {"study.enqueue": [{"learning_rate": 5.0}]},
            "study.enqueue.0.learning_rate",
            "outside the search space",
        ),
        (
            {"study.enqueue": [{"activation": "silu"}]},
            "study.enqueue.0.activation",
            "outside the search space",
        ),
        ({"study.enqueue": [{"hidden_size": 20}]}, "study.enqueue.0.hidden_size", "in steps of 16"),
        ({"study.enqueue": [{"lr": 0.1}]}, "study.enqueue.0.lr", "not a parameter of search_space"),
        (
            {"study.keep_checkpoints": {"top_k": -1}},
            "study.keep_checkpoints.top_k",
            "greater than or equal to 0",
        ),
        ({"resources.gpus_per_trial": 0}, "resources.gpus_per_trial", "greater than or equal to 1"),
        (
            {"resources.gpus_per_trial": 2, "resources.trials_per_gpu": 2},
            "resources.trials_per_gpu",
            "gpus_per_trial: 1",
        ),
        (
            {"resources.heartbeat_interval": 30, "resources.grace_period": 10},
            "resources.grace_period",
            "longer than heartbeat_interval",
        ),
        ({"training.lerning_rate": 1}, "training.lerning_rate", "did you mean learning_rate?"),
        ({"output_dir": "x"}, "output_dir", "study.output_dir"),
        ({"tracking.wandb": {"project": "p", "tag": ["a"]}}, "tracking.wandb.tag", "did you mean tags?"),
    ],
)
def test_refused_configurations_name_the_field(changes, path, text):
    found_path, message = problem(study(**changes))
    assert found_path == path, message
    assert text in message


def test_pruner_with_several_objectives_is_refused():
    path, message = problem(
        study(
            **{
                "study.metric": None,
                "study.metrics": ["accuracy", "loss"],
                "study.pruner": {"type": "median"},
            }
        )
    )
    assert path == "study.pruner" and "cannot prune a study with several objectives" in message


def test_pruner_with_evaluation_off_is_refused():
    path, message = problem(study(**{"training.eval_strategy": None, "study.pruner": {"type": "hyperband"}}))
    assert path == "study.pruner" and "needs evaluations" in message
    path, _ = problem(
        study(
            **{
                "study.pruner": {"type": "median"},
                "search_space.eval_strategy": {"type": "categorical", "choices": ["epoch", "no"]},
            }
        )
    )
    assert path == "study.pruner"


def test_no_pruner_by_default_when_evaluation_is_off():
    assert parse_study_spec(study(**{"training.eval_strategy": None})).study.pruner.type == "none"


def test_conditions_that_form_a_cycle_are_refused():
    path, message = problem(
        study(
            **{
                "search_space.a": {"type": "categorical", "choices": [1, 2], "when": {"b": 1}},
                "search_space.b": {"type": "categorical", "choices": [1, 2], "when": {"a": 1}},
            }
        )
    )
    assert path.startswith("search_space.") and "form a cycle" in message


def test_sampler_and_pruner_options_inline_or_nested_build_optuna_objects():
    spec = parse_study_spec(
        study(
            **{
                "study.sampler": {"type": "tpe", "seed": 1, "n_startup_trials": 3},
                "study.pruner": {
                    "type": "patient",
                    "patience": 2,
                    "options": {"min_delta": 0.1},
                    "wrapped": {"type": "hyperband", "min_resource": 1, "reduction_factor": 3},
                },
            }
        )
    )
    assert spec.study.sampler.options == {"n_startup_trials": 3}
    assert isinstance(spec.study.sampler.build(), optuna.samplers.TPESampler)
    pruner = spec.study.pruner.build()
    assert isinstance(pruner, optuna.pruners.PatientPruner)
    assert isinstance(pruner._wrapped_pruner, optuna.pruners.HyperbandPruner)


def test_grid_sampler_gets_the_grid_of_the_space():
    spec = parse_study_spec(
        study(
            **{
                "study.sampler": {"type": "grid"},
                "search_space.learning_rate": {"type": "float", "low": 0.1, "high": 0.3, "step": 0.1},
                "search_space.dropout.step": 0.25,
            }
        )
    )
    grid = {name: p.grid_values() for name, p in spec.sampled_params().items()}
    assert grid["learning_rate"] == [0.1, 0.2, 0.3] and grid["hidden_size"] == [16, 32, 48, 64]
    assert (
        grid["dropout"] == [0.0, 0.25, 0.5] and grid["activation"] == ["relu", "gelu"] and "seed" not in grid
    )
    assert isinstance(spec.study.sampler.build(grid), optuna.samplers.GridSampler)


def test_distributions_match_the_space():
    spec = parse_study_spec(STUDY)
    lr = spec.search_space["learning_rate"].to_distribution()
    assert isinstance(lr, optuna.distributions.FloatDistribution) and lr.log and lr.low == 1e-4
    assert spec.search_space["hidden_size"].to_distribution().step == 16
    assert spec.search_space["seed"].to_distribution() is None


def test_storage_from_the_command_line_wins(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(STUDY))
    url = f"sqlite:///{tmp_path}/other.db"
    assert load_study_spec(path, storage=url).storage == url
    assert (
        load_study_spec(path, overrides=["study.storage=postgresql://u@h/db"]).store_url
        == "postgresql://u@h/db"
    )
    assert isinstance(load_spec(path), StudySpec)
    with pytest.raises(ConfigError, match="study.storage: 'bad' is not a database URL"):
        load_study_spec(path, storage="bad")


def test_study_name_defaults_to_the_file_name(tmp_path):
    path = tmp_path / "my_study.yaml"
    path.write_text(yaml.safe_dump(study(**{"study.name": None})))
    assert load_study_spec(path).name == "my_study"


def test_overrides_reach_the_search_space(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(STUDY))
    spec = load_study_spec(path, overrides=["search_space.learning_rate.high=1e-2", "study.n_trials=9"])
    assert spec.search_space["learning_rate"].high == 1e-2 and spec.study.n_trials == 9
    with pytest.raises(ConfigError, match="search_space.learning_rate.low: must be > 0 when log is true"):
        load_study_spec(path, overrides=["search_space.learning_rate.low=0"])


def test_every_field_problem_is_reported_at_once():
    data = study(**{"study.n_trials": -1, "training.lerning_rate": 1, "search_space.learning_rate.low": 0})
    with pytest.raises(SpecError) as caught:
        parse_study_spec(data, source="study.yaml")
    assert [path for path, _ in caught.value.problems] == [
        "study.n_trials",
        "training.lerning_rate",
        "search_space.learning_rate.low",
    ]
