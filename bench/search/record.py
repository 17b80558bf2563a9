"""Record a problem's learning curves: train each configuration once, to the full budget, and keep its metric at every
evaluation and the wall seconds each segment between two evaluations cost.

    OMP_NUM_THREADS=1 python bench/search/record.py --problem digits            # 300 configurations, ~15 min, 1 core
    python bench/search/record.py --problem digits --limit 5 --out /tmp/d.json.gz   # a smoke run
    python bench/search/record.py --problem friedman --configurations 300 --out bench/search/data/dense/friedman.json.gz

The configurations are the study file's `enqueue:` points, then points drawn from its search space by a RandomSampler
with the problem's seed (hpo's own `sample_params`, so conditional parameters appear as in `hpo run`). Each is trained
the way a trial of `hpo run` trains it (hpo.trial.run: the study's training section, `trial_arguments`, the seed set
right before `model_init`, the task's data, model and metrics, our Trainer), in this one process, one after another,
on one thread. Two things differ from a trial, on purpose: no checkpoints are written (`save_strategy: no`: the
simulator charges pauses and resumes from measured figures instead) and nothing is tracked. The file is rewritten
every few configurations, so `--resume` continues an interrupted recording. Each configuration keeps the machine's
1-minute load when it ended (`load_1min`): a figure well above 1 says other work shared the cores while it ran.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna
import torch

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from bench.search.problems import PROBLEMS, Problem  # noqa: E402
from hpo.spec import StudySpec, load_study_spec, metric_key  # noqa: E402
from hpo.trial.adapter import wrap_model  # noqa: E402
from hpo.trial.run import trial_arguments  # noqa: E402
from hpo.trial.space import sample_params  # noqa: E402
from trainer import PrinterCallback, ProgressCallback, Trainer, TrainerCallback, set_seed  # noqa: E402

SAVE_EVERY = 10  # configurations between two writes of the file


def draw_configurations(problem: Problem, spec: StudySpec) -> list[dict[str, Any]]:
    """The study's enqueued points, then random draws from its space, up to `problem.configurations`."""
    points = [dict(p) for p in spec.study.enqueue][: problem.configurations]
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=problem.draw_seed))
    while len(points) < problem.configurations:
        trial = study.ask()
        points.append(sample_params(trial, spec.search_space))
        study.tell(trial, 0.0)
    return points


class CurveRecorder(TrainerCallback):
    """Wall-clock marks: the start of training (after set-up) and the end of every evaluation, with its metrics."""

    def __init__(self) -> None:
        self.created = time.perf_counter()
        self.began: float | None = None
        self.evaluations: list[tuple[int, float, dict[str, float]]] = []  # (global step, time, metrics)

    def on_train_begin(self, args, state, control, **kwargs):
        self.began = time.perf_counter()

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        self.evaluations.append((state.global_step, time.perf_counter(), dict(metrics or {})))


def train_one(
    spec: StudySpec, problem: Problem, params: dict[str, Any], number: int, folder: Path, datasets: tuple
) -> CurveRecorder:
    """As hpo.trial.run._train_and_score, without Optuna, pruning, tracking or checkpoints."""
    task = spec.task.resolve()
    training, model_params = spec.split_params(params)
    overrides = {**problem.training, **training, "save_strategy": "no"}
    args = trial_arguments(spec, folder / f"trial-{number}", number, overrides)

    def model_init():
        set_seed(args.seed)  # as a trial: every configuration starts from the initialisation its seed gives
        model = task.model_init(dict(model_params))
        return model if spec.peft is None else wrap_model(model, spec.peft, spec.peft_params(params))

    recorder = CurveRecorder()
    set_seed(args.seed)
    trainer = Trainer(
        model_init=model_init,
        args=args,
        train_dataset=datasets[0],
        eval_dataset=datasets[1],
        data_collator=task.collator,
        compute_metrics=task.compute_metrics,
        callbacks=[recorder],
    )
    for console_output in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(console_output)
    trainer.train()
    return recorder


def curve_entry(
    params: dict[str, Any], recorder: CurveRecorder, problem: Problem, metrics: list[str]
) -> dict:
    steps = [step for step, _, _ in recorder.evaluations]
    if steps != problem.rung_steps:
        raise SystemExit(f"recorded evaluations at steps {steps}, the problem says {problem.rung_steps}")
    assert recorder.began is not None
    marks = [recorder.began] + [at for _, at, _ in recorder.evaluations]
    return {
        "params": params,
        "setup_s": round(
            recorder.began - recorder.created, 4
        ),  # Trainer, model, optimizer: paid at every start
        "segment_s": [
            round(b - a, 4) for a, b in zip(marks[:-1], marks[1:], strict=True)
        ],  # training to an evaluation, and it
        **{name: [round(float(m[name]), 5) for _, _, m in recorder.evaluations] for name in metrics},
        # The machine's 1-minute load when it ended: about 1 on a quiet 2-core machine (this recording's one thread);
        # higher means other work shared the cores, and this configuration's costs are slower than its own.
        "load_1min": round(os.getloadavg()[0], 2),
    }


def conditions(problem: Problem, started: float) -> dict[str, Any]:
    return {
        "machine": platform.node(),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "optuna": optuna.__version__,
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"
        ),  # of the last write
        "load_average_1min": os.getloadavg()[
            0
        ],  # at the last write: other work on the machine slows the curves
        "recording_wall_s": round(time.perf_counter() - started, 1),
        "checkpoints": "none (save_strategy: no)",
    }


def write(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".part")
    with gzip.open(partial, "wt", encoding="utf-8") as out:
        json.dump(payload, out, separators=(",", ":"))
    partial.replace(path)


def record(problem: Problem, out: Path, limit: int | None, resume: bool) -> dict[str, Any]:
    torch.set_num_threads(1)
    spec = load_study_spec(problem.study)
    points = draw_configurations(problem, spec)[:limit]
    metrics = sorted({metric_key(m) for m in (spec.study.metrics or [])} | {"eval_loss"})
    done: list[dict] = []
    spent = 0.0
    if resume and out.exists():
        with gzip.open(out, "rt") as stored:
            previous = json.load(stored)
        done = previous["configurations"]
        spent = previous["conditions"]["recording_wall_s"]
        assert [c["params"] for c in done] == points[: len(done)], "--resume: another draw of configurations"
    started = time.perf_counter() - spent
    # Loaded once, as a worker does for a data() whose parameters are not searched: the file's `model:` section.
    datasets = spec.task.resolve().data(dict(spec.model))
    header = {
        "problem": problem.name,
        "study": str(problem.study.relative_to(problem.study.parents[1])),
        "draw_seed": problem.draw_seed,
        "steps": problem.rung_steps,
        "metrics": metrics,
        "objective": spec.study.objective,
        "direction": (spec.study.directions or ["minimize"])[0],
    }
    with tempfile.TemporaryDirectory() as folder:
        for number in range(len(done), len(points)):
            recorder = train_one(spec, problem, points[number], number, Path(folder), datasets)
            done.append(curve_entry(points[number], recorder, problem, metrics))
            if len(done) % SAVE_EVERY == 0 or len(done) == len(points):
                payload = {**header, "conditions": conditions(problem, started), "configurations": done}
                write(out, payload)
                print(
                    f"{len(done)}/{len(points)} configurations, {time.perf_counter() - started:.0f} s",
                    flush=True,
                )
    return payload


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--problem", default="digits", choices=sorted(PROBLEMS))
    parser.add_argument("--limit", type=int, help="record only the first N configurations")
    parser.add_argument(
        "--configurations",
        type=int,
        help="draw N configurations instead of the problem's own count (the first ones are the same draws): a denser "
        "recording, e.g. --configurations 300 --out bench/search/data/dense/<problem>.json.gz",
    )
    parser.add_argument("--out", type=Path, help="default: bench/search/data/<problem>.json.gz")
    parser.add_argument("--resume", action="store_true", help="continue the recording in --out")
    options = parser.parse_args()
    problem = PROBLEMS[options.problem]
    if options.configurations:
        problem = replace(problem, configurations=options.configurations)
    out = options.out or problem.data_file
    payload = record(problem, out, options.limit, options.resume)
    print(
        f"wrote {out} ({out.stat().st_size / 1024:.0f} KB): {len(payload['configurations'])} configurations, "
        f"{payload['conditions']['recording_wall_s']} s"
    )


if __name__ == "__main__":
    main()
