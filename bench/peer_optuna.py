"""The shipped digits study (studies/digits_mlp.yaml) glued by hand with Optuna alone: what hpo replaces.

    python bench/peer_optuna.py --out /tmp/optuna-alone            # 30 trials, 2 processes on one SQLite storage
    python bench/peer_optuna.py --out /tmp/o --trials 1 --epochs 1 --processes 1   # start-up cost

The most common setup: a TPE sampler and a Hyperband pruner on a SQLite storage, `study.optimize` in two processes,
and a hand-written PyTorch loop as the objective. Same data split, model, optimizer (AdamW, weight decay on matrices
only), schedule (cosine, 5 % warm-up), gradient clipping (1.0), batch sizes, seed, search space (dropout only for 2 or
3 layers), enqueued first point, one evaluation per epoch reported at the global step, and a trial scored by its best
evaluation. No checkpoints and no tracking: a user gluing Optuna by hand rarely writes them.

Each worker process prints one JSON line per finished trial (number, state, value, steps, start and end unix times);
`bench/peers.py` and `bench/gap.py` read the storage instead.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import optuna  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from studies.tasks import digits  # noqa: E402

STUDY = "digits_mlp"
ENQUEUED = {
    "learning_rate": 0.003,
    "hidden_size": 128,
    "num_layers": 1,
    "activation": "relu",
    "weight_decay": 0.0001,
}
BATCH, EVAL_BATCH, WARMUP_RATIO, MAX_GRAD_NORM, SEED = 32, 512, 0.05, 1.0, 0


def sample(trial: optuna.Trial) -> dict[str, Any]:
    """The study file's search space, in its order; dropout only for deeper MLPs."""
    params: dict[str, Any] = {
        "learning_rate": trial.suggest_float("learning_rate", 3.0e-4, 3.0e-2, log=True),
        "weight_decay": trial.suggest_float("weight_decay", 1.0e-6, 1.0e-2, log=True),
        "hidden_size": trial.suggest_int("hidden_size", 32, 256, step=32),
        "num_layers": trial.suggest_int("num_layers", 1, 3),
        "activation": trial.suggest_categorical("activation", ["relu", "gelu", "tanh"]),
    }
    if params["num_layers"] in (2, 3):
        params["dropout"] = trial.suggest_float("dropout", 0.0, 0.4)
    return params


def cosine_with_warmup(total: int) -> Any:
    warmup = math.ceil(total * WARMUP_RATIO)

    def factor(step: int) -> float:
        if step < warmup:
            return step / max(1, warmup)
        progress = (step - warmup) / max(1, total - warmup)
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))

    return factor


def accuracy(model: torch.nn.Module, loader: DataLoader) -> float:
    model.eval()
    right = total = 0
    with torch.no_grad():
        for batch in loader:
            logits = model(batch["pixels"])["logits"]
            right += int((logits.argmax(-1) == batch["labels"]).sum())
            total += len(batch["labels"])
    model.train()
    return right / total


def make_objective(epochs: int):
    train_set, eval_set = digits.data()

    def objective(trial: optuna.Trial) -> float:
        params = sample(trial)
        model_params = {
            k: params[k] for k in ("hidden_size", "num_layers", "activation", "dropout") if k in params
        }
        torch.manual_seed(SEED)
        model = digits.model_init(model_params)
        decay = [p for p in model.parameters() if p.ndim >= 2]
        no_decay = [p for p in model.parameters() if p.ndim < 2]
        optimizer = torch.optim.AdamW(
            [
                {"params": decay, "weight_decay": params["weight_decay"]},
                {"params": no_decay, "weight_decay": 0.0},
            ],
            lr=params["learning_rate"],
        )
        generator = torch.Generator().manual_seed(SEED)
        train_loader = DataLoader(train_set, batch_size=BATCH, shuffle=True, generator=generator)
        eval_loader = DataLoader(eval_set, batch_size=EVAL_BATCH)
        total = epochs * len(train_loader)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, cosine_with_warmup(total))
        best, step = -1.0, 0
        for _ in range(epochs):
            for batch in train_loader:
                loss = model(**batch)["loss"]
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
                optimizer.step()
                schedule.step()
                step += 1
            value = accuracy(model, eval_loader)
            best = max(best, value)
            trial.report(value, step)
            if trial.should_prune():
                trial.set_user_attr("best", best)
                raise optuna.TrialPruned()
        return best

    return objective


def make_study(storage: str, seed: int) -> optuna.Study:
    return optuna.create_study(
        study_name=STUDY,
        storage=storage,
        direction="maximize",
        load_if_exists=True,
        sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=8, multivariate=True),
        pruner=optuna.pruners.HyperbandPruner(min_resource=45, max_resource=900, reduction_factor=3),
    )


def worker(storage: str, seed: int, trials: int, epochs: int) -> None:
    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = make_study(storage, seed)
    study.optimize(
        make_objective(epochs),
        callbacks=[optuna.study.MaxTrialsCallback(trials, states=None)],
        n_trials=trials,
    )


def run(out: Path, trials: int, epochs: int, processes: int, seed: int) -> float:
    """Create the study, enqueue the known-good point, start the worker processes; wall seconds until they end."""
    out.mkdir(parents=True, exist_ok=True)
    storage = f"sqlite:///{out / 'study.db'}"
    started = time.perf_counter()
    study = make_study(storage, seed)
    study.enqueue_trial(ENQUEUED)
    command = [sys.executable, __file__, "--worker", "--storage", storage, "--trials", str(trials)]
    command += ["--epochs", str(epochs)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    children = [
        subprocess.Popen([*command, "--seed", str(seed + index)], env=env) for index in range(processes)
    ]
    codes = [child.wait() for child in children]
    if any(codes):
        raise SystemExit(f"an Optuna worker failed: exit codes {codes}")
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/optuna_alone"))
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--storage", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.worker:
        worker(options.storage, options.seed, options.trials, options.epochs)
        return
    wall = run(options.out, options.trials, options.epochs, options.processes, options.seed)
    study = optuna.load_study(study_name=STUDY, storage=f"sqlite:///{options.out / 'study.db'}")
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    pruned = [t for t in study.trials if t.state == optuna.trial.TrialState.PRUNED]
    best = max((t.value for t in done), default=float("nan"))
    print(json.dumps({"wall_s": round(wall, 2), "best": best, "complete": len(done), "pruned": len(pruned)}))


if __name__ == "__main__":
    main()
