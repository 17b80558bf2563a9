"""Sampling the search space: conditional parameters appear only when their condition holds; routing by target."""

from __future__ import annotations

from pathlib import Path

import optuna
from study_task import write_study

from hpo.spec import load_study_spec
from hpo.trial.space import sample_params

SPACE = {
    "optim": {"type": "categorical", "choices": ["sgd", "adamw_torch"]},
    "momentum": {"type": "float", "low": 0.0, "high": 0.99, "when": {"optim": "sgd"}},
    "hidden": {"type": "int", "low": 8, "high": 64, "step": 8},
    "depth": {"type": "int", "low": 1, "high": 3},
    "dropout": {"type": "float", "low": 0.0, "high": 0.5, "when": {"depth": [2, 3]}},
    "activation": {"type": "categorical", "choices": ["relu", "gelu"], "when": {"depth": [2, 3]}},
    "gelu_approx": {"type": "categorical", "choices": [True, False], "when": {"activation": "gelu"}},
    "learning_rate": {"type": "float", "low": 1e-4, "high": 1e-1, "log": True},
    "seed": {"type": "fixed", "value": 7},
}


def _spec(tmp_path: Path):
    return load_study_spec(write_study(tmp_path, search_space=SPACE))


def test_conditional_parameters_appear_only_when_their_condition_holds(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = []
    for _ in range(40):
        trial = study.ask()
        params = sample_params(trial, spec.search_space)
        study.tell(trial, 0.0)
        seen.append(params)
        assert ("momentum" in params) == (params["optim"] == "sgd")
        assert ("dropout" in params) == (params["depth"] in (2, 3))
        assert ("activation" in params) == (params["depth"] in (2, 3))
        # A condition on a conditional parameter: only when that one was sampled and has the value.
        assert ("gelu_approx" in params) == (params.get("activation") == "gelu")
        assert params["seed"] == 7  # fixed values are part of the params, never sampled
        assert "seed" not in trial.params
        assert set(trial.params) == set(params) - {"seed"}
    # Both branches of every condition were taken, so the asserts above tested something.
    assert {p["optim"] for p in seen} == {"sgd", "adamw_torch"}
    assert {p["depth"] for p in seen} == {1, 2, 3}
    assert any("gelu_approx" in p for p in seen) and any(
        "activation" in p and "gelu_approx" not in p for p in seen
    )


def test_ranges_steps_and_log_scale_are_honoured(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(30):
        trial = study.ask()
        params = sample_params(trial, spec.search_space)
        study.tell(trial, 0.0)
        assert params["hidden"] % 8 == 0 and 8 <= params["hidden"] <= 64
        assert 1e-4 <= params["learning_rate"] <= 1e-1
    distribution = study.trials[0].distributions["learning_rate"]
    assert distribution.log is True


def test_keys_route_to_training_arguments_or_model_init(tmp_path: Path) -> None:
    space = {
        **SPACE,
        "warmup_steps": {"type": "int", "low": 0, "high": 4},  # a TrainingArguments field
        "weight_decay": {
            "type": "float",
            "low": 0.0,
            "high": 0.1,
            "target": "model",
        },  # a field, sent to the model
    }
    spec = load_study_spec(write_study(tmp_path, search_space=space, model={"width_multiplier": 2}))
    params = {
        "optim": "sgd",
        "momentum": 0.9,
        "hidden": 16,
        "learning_rate": 0.01,
        "seed": 7,
        "warmup_steps": 2,
        "weight_decay": 0.05,
        "depth": 1,
    }
    training, model = spec.split_params(params)
    assert training == {"optim": "sgd", "learning_rate": 0.01, "seed": 7, "warmup_steps": 2}
    assert model == {"width_multiplier": 2, "momentum": 0.9, "hidden": 16, "weight_decay": 0.05, "depth": 1}
