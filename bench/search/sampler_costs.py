"""What a trial's sampler costs at its claim, as the study grows: the part of a real trial's start that
`trial_costs.py` cannot see, since it enqueues recorded configurations (a fixed parameter never asks the sampler).

    python bench/search/sampler_costs.py --problem digits --trials 60       # about 15 s on 2 cores

On a SQLite study made by hpo's own storage (a worker's reads and writes, riding through outages), each trial's
parameters are drawn as a worker draws them (`hpo.trial.space.sample_params`, after the claim, so inside the start
a trial writes as `seconds_to_first_report`) by the sampler the suite's method builds for the problem, seeded as the
suite seeds its first worker. Beside it, in the same loop, the same parameters are drawn again for a trial that has
them enqueued: the baseline, what the suite's measured start (`--start-inside-s`, from trial_costs.py) already holds.
Trials report and end as a study under ASHA does (a third run to the end, the rest stop after 1, 2 or 4
evaluations), with the values of a recorded configuration drawn at random, so the sampler sees a study of the
problem's shape. Printed per block of trials: the median milliseconds of each and their ratio, then the extra
(sampled less enqueued) in the recording's seconds (this machine's speed against the recording's, speed.py).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import optuna
from optuna.trial import TrialState

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from bench.search.problems import PROBLEMS  # noqa: E402
from bench.search.recording import load  # noqa: E402
from bench.search.speed import speed_factor  # noqa: E402
from bench.search.suite import methods_of  # noqa: E402
from hpo.spec import load_study_spec  # noqa: E402
from hpo.storage.database import create_storage  # noqa: E402
from hpo.storage.study_db import release_connections  # noqa: E402
from hpo.trial.space import sample_params  # noqa: E402

PICK = "hpo: ranked keep 1/3 (sooner when sure; 2/3 until it ranks) plain TPE"  # what ships (round 17)
BLOCK = 10  # trials per printed line
STOPS_AFTER = (1, 2, 4)  # evaluations before a stopped trial ends, as ASHA's rungs from the first evaluation


def timed_draws(problem: str, method: str, trials: int, seed: int) -> list[tuple[float, float]]:
    """(seconds to draw a trial's parameters with the method's sampler, seconds for the same parameters enqueued),
    one pair per trial of a study that grows to `trials`."""
    recording = load(PROBLEMS[problem])
    spec = load_study_spec(recording.problem.study)
    sampler = methods_of(problem)[method].sampler_for(spec, seed, 0)
    with tempfile.TemporaryDirectory(prefix="search-sampler-costs-") as folder:
        storage = create_storage(f"sqlite:///{Path(folder) / 'study.db'}")
        direction = spec.study.direction
        study = optuna.create_study(
            study_name="sampled", storage=storage, sampler=sampler, direction=direction
        )
        baseline = optuna.create_study(study_name="enqueued", storage=storage, direction=direction)
        draw = random.Random(seed)
        pairs = []
        for _ in range(trials):
            trial = study.ask()
            started = time.perf_counter()
            params = sample_params(trial, spec.search_space)
            sampled = time.perf_counter() - started
            baseline.enqueue_trial(params)
            fixed = baseline.ask()
            started = time.perf_counter()
            sample_params(fixed, spec.search_space)
            pairs.append((sampled, time.perf_counter() - started))
            end_like_asha(study, trial, recording.curves[draw.randrange(len(recording.curves))].values, draw)
            baseline.tell(fixed, state=TrialState.PRUNED)
        release_connections(study)  # the folder goes: no SQLite file may stay open in it
    return pairs


def end_like_asha(study: optuna.Study, trial: optuna.Trial, values: list[float], draw: random.Random) -> None:
    """Report the recorded curve's first evaluations and end the trial: a third complete, the rest stop early."""
    if draw.random() < 1 / 3:
        for step, value in enumerate(values, start=1):
            trial.report(value, step)
        study.tell(trial, values[-1])
        return
    for step, value in enumerate(values[: draw.choice(STOPS_AFTER)], start=1):
        trial.report(value, step)
    study.tell(trial, state=TrialState.PRUNED)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--problem", default="digits", choices=sorted(PROBLEMS))
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--method", default=PICK, help="the suite's method whose sampler draws (default: what ships)"
    )
    options = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    pairs = timed_draws(options.problem, options.method, options.trials, options.seed)
    print(f"{options.problem}, {options.method}: drawing a trial's parameters, median ms per block of trials")
    print("trials | sampled | enqueued (baseline) | ratio")
    for first in range(0, len(pairs), BLOCK):
        block = pairs[first : first + BLOCK]
        sampled = statistics.median(s for s, _ in block) * 1000
        enqueued = statistics.median(e for _, e in block) * 1000
        print(
            f"{first + 1}-{first + len(block)} | {sampled:.1f} | {enqueued:.1f} | {sampled / enqueued:.2f}x"
        )
    factor = speed_factor(load(PROBLEMS[options.problem]))
    extra = statistics.median(s - e for s, e in pairs[BLOCK:] or pairs)
    print(
        f"extra after the first {BLOCK} trials: {extra * 1000:.1f} ms here, {extra / factor:.4f} s in the recording's "
        f"seconds (this machine {factor:.2f}x the recording)"
    )


if __name__ == "__main__":
    main()
