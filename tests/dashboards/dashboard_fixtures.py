"""Real data for the dashboard tests: Optuna studies made by really optimizing (with intermediate values, pruned, failed
and still-running trials), and an experiment store in the contract's schema (CONTRACTS.md section 6) via sqlite-utils.

Strings that would be markup if a page were careless (`<script>`, `<img onerror>`) sit in a parameter choice, a user
attribute, an error message, a metric name and a run name, so the browser tests can check they show as text.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import optuna
import sqlite_utils

SCRIPT_CHOICE = "<script>window.__hacked = 1</script>"
IMG_ERROR = '<img src=x onerror="window.__hacked = 2">boom'
STUDY = "digits-demo"
PARETO_STUDY = "pareto-demo"
XSS_STUDY = "xss <script>window.__hacked = 3</script>"
N_FINISHED = 14  # trials 0..13 finish; one more is left RUNNING


def objective(trial: optuna.Trial) -> float:
    lr = trial.suggest_float("learning_rate", 1e-4, 1e-1, log=True)
    layers = trial.suggest_int("num_layers", 1, 3)
    activation = trial.suggest_categorical("activation", ["relu", "gelu", SCRIPT_CHOICE])
    trial.set_user_attr("slot", trial.number % 2)
    trial.set_user_attr("host", "node-a")
    trial.set_user_attr("devices", "cpu")
    if trial.number == 5:
        trial.set_user_attr("error", IMG_ERROR)
        raise RuntimeError("diverged")
    loss = 1.0
    for step in range(1, 9):
        loss = loss * (0.6 + abs(math.log10(lr) + 2.5) * 0.08 + 0.02 * layers) + (
            0.05 if activation == "gelu" else 0
        )
        trial.report(loss, step * 10)
        if trial.should_prune():
            trial.set_user_attr("pruned_step", step * 10)
            raise optuna.TrialPruned()
    return loss


def build_study(storage: str) -> optuna.Study:
    sampler = optuna.samplers.TPESampler(seed=0, n_startup_trials=4)
    pruner = optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=20)
    study = optuna.create_study(study_name=STUDY, storage=storage, sampler=sampler, pruner=pruner)
    study.set_metric_names(["eval_loss"])
    study.enqueue_trial({"learning_rate": 0.003, "num_layers": 1, "activation": SCRIPT_CHOICE})
    study.optimize(objective, n_trials=N_FINISHED, catch=(RuntimeError,))
    running = study.ask()  # a trial still running when the dashboard looks
    running.suggest_float("learning_rate", 1e-4, 1e-1, log=True)
    running.set_user_attr("slot", 0)
    running.report(0.9, 10)
    return study


def build_pareto_study(storage: str) -> optuna.Study:
    study = optuna.create_study(
        study_name=PARETO_STUDY,
        storage=storage,
        directions=["minimize", "maximize"],
        sampler=optuna.samplers.RandomSampler(seed=1),
    )
    study.set_metric_names(["loss", "accuracy"])

    def two_objectives(trial: optuna.Trial) -> tuple[float, float]:
        x = trial.suggest_float("x", 0.0, 1.0)
        width = trial.suggest_int("width", 8, 64, step=8)
        return x**2 + 1 / width, 1 - (1 - x) ** 2

    study.optimize(two_objectives, n_trials=12)
    return study


def metric_rows(run_id: str, steps: int, start: float, final_loss: float) -> list[dict]:
    rows = []
    for step in range(1, steps + 1):
        t = start + step
        loss = 2.0 * (final_loss / 2.0) ** (step / steps)
        rows += [
            {
                "run_id": run_id,
                "step": step * 10,
                "epoch": step / 4,
                "name": "loss",
                "value": loss,
                "time": t,
            },
            {
                "run_id": run_id,
                "step": step * 10,
                "epoch": step / 4,
                "name": "learning_rate",
                "value": 1e-3 * (1 - step / (steps + 1)),
                "time": t,
            },
            {
                "run_id": run_id,
                "step": step * 10,
                "epoch": step / 4,
                "name": "grad_norm",
                "value": 1.0 / step,
                "time": t,
            },
            {
                "run_id": run_id,
                "step": step * 10,
                "epoch": step / 4,
                "name": "train_samples_per_second",
                "value": 900.0 + step,
                "time": t,
            },
        ]
        if step % 2 == 0:
            rows.append(
                {
                    "run_id": run_id,
                    "step": step * 10,
                    "epoch": step / 4,
                    "name": "eval_loss",
                    "value": loss * 1.1,
                    "time": t,
                }
            )
            rows.append(
                {
                    "run_id": run_id,
                    "step": step * 10,
                    "epoch": step / 4,
                    "name": "eval_accuracy",
                    "value": 1 - loss / 3,
                    "time": t,
                }
            )
    return rows


def build_store(path: Path, study: optuna.Study) -> list[str]:
    """Runs, metrics, events and checkpoints for the study's trials and for two single runs; returns the run ids."""
    db = sqlite_utils.Database(path)
    now = time.time()
    run_ids = []
    for trial in study.get_trials(deepcopy=False):
        run_id = f"{study.study_name}/trial-{trial.number}"
        status = {"COMPLETE": "completed", "PRUNED": "pruned", "FAIL": "failed"}.get(
            trial.state.name, "running"
        )
        db["hpo_runs"].insert(
            {
                "id": run_id,
                "kind": "trial",
                "study_name": study.study_name,
                "trial_number": trial.number,
                "name": f"trial-{trial.number}",
                "status": status,
                "params": json.dumps(trial.params),
                "arguments": json.dumps(
                    {"learning_rate": trial.params.get("learning_rate"), "max_steps": 80}
                ),
                "state": json.dumps({"global_step": 80}),
                "started_at": now - 100,
                "ended_at": now - 10,
                "host": "node-a",
                "slot": str(trial.number % 2),
                "devices": "cpu",
                "command": "hpo run demo.yaml",
                "packages": json.dumps({"torch": "2.13.0"}),
                "git_commit": "abc123",
                "output_dir": f"runs/demo/trial-{trial.number}",
                "objective": trial.value if trial.values else None,
                "extra": json.dumps({}),
            },
            pk="id",
        )
        db["hpo_metrics"].insert_all(metric_rows(run_id, 8, now - 100, trial.value if trial.values else 0.8))
        db["hpo_events"].insert_all(
            [
                {
                    "run_id": run_id,
                    "time": now - 100,
                    "kind": "started",
                    "message": "trial started",
                    "data": "{}",
                },
                {
                    "run_id": run_id,
                    "time": now - 10,
                    "kind": "failed" if status == "failed" else "evaluated",
                    "message": IMG_ERROR if status == "failed" else "eval_loss 0.5",
                    "data": json.dumps({"step": 80}),
                },
            ]
        )
        db["hpo_artifacts"].insert(
            {
                "run_id": run_id,
                "kind": "checkpoint",
                "path": f"runs/demo/trial-{trial.number}/checkpoint-80",
                "sha256": "0" * 64,
                "size": 123456,
                "step": 80,
                "time": now - 10,
            }
        )
        run_ids.append(run_id)
    for index, name in enumerate(["baseline", "wide <b>lr</b>"]):
        run_id = f"run/{name}-{int(now) + index}"
        db["hpo_runs"].insert(
            {
                "id": run_id,
                "kind": "run",
                "study_name": None,
                "trial_number": None,
                "name": name,
                "status": "completed",
                "params": json.dumps({"hidden_size": 64 * (index + 1)}),
                "arguments": json.dumps({"learning_rate": 1e-3 * (index + 1), "max_steps": 80}),
                "state": json.dumps({"global_step": 80}),
                "started_at": now - 300 + index,
                "ended_at": now - 200,
                "host": "node-a",
                "slot": None,
                "devices": "cpu",
                "command": "hpo train run.yaml",
                "packages": json.dumps({}),
                "git_commit": None,
                "output_dir": f"outputs/{name}",
                "objective": 0.4 + index / 10,
                "extra": json.dumps({}),
            },
            pk="id",
        )
        db["hpo_metrics"].insert_all(metric_rows(run_id, 10, now - 300, 0.4 + index / 10))
        db["hpo_events"].insert(
            {"run_id": run_id, "time": now - 300, "kind": "started", "message": "run started", "data": "{}"}
        )
        run_ids.append(run_id)
    return run_ids


def build_everything(folder: Path) -> dict:
    """study.db (two studies) and experiments.db beside it, as `hpo run` lays them out."""
    folder.mkdir(parents=True, exist_ok=True)
    storage = f"sqlite:///{folder / 'study.db'}"
    study = build_study(storage)
    pareto = build_pareto_study(storage)
    hostile = optuna.create_study(study_name=XSS_STUDY, storage=storage)
    hostile.optimize(lambda trial: trial.suggest_float("<b>x</b>", 0, 1), n_trials=3)
    run_ids = build_store(folder / "experiments.db", study)
    return {
        "storage": storage,
        "store": str(folder / "experiments.db"),
        "study": study,
        "pareto": pareto,
        "run_ids": run_ids,
    }


def answer(api, path: str, query: dict) -> dict:
    """An API answer as the browser receives it (decoded JSON)."""
    from dashboards.jsonenc import encode_json

    return json.loads(encode_json(api.handle(path, query)))
