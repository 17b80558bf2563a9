"""What a real `hpo run` trial costs beyond its recorded compute, in the three places the simulator could charge it:
inside the trial's measured start (its claim to its first report, less the recorded set-up and first segment), at
each report (an evaluation interval less the recorded segment: the storage write and the pruner's call, and the
checkpoint `save_strategy: best` writes when the evaluation is a new best, which a method without a pruner pays too;
`--save-strategy no` leaves it out), and between
trials (one trial's outcome to the next one's claim, with one worker: the process's exit, the sampler's ask).

    python bench/search/trial_costs.py --problem fresh-diabetes --trials 12      # about a minute on 2 cores
    python bench/search/trial_costs.py --problem digits --save-strategy no      # a report without its checkpoint

Recorded configurations are enqueued (crosscheck.py's study, `scheduler: {type: asha}` as written, one worker), so
each real trial replays a recorded one and its recorded seconds are known; real seconds are divided by this machine's
speed against the recording's (speed.py). The first trial pays the worker's one-time imports and is left out. The
simulator (simulate.py) charges the whole per-trial overhead, `--start-s`, between a trial's claim and its first
report, and nothing per report; the last line compares the start measure rounds 14 and 15's rules read
(bench/search/ranked_keep.start_in_intervals; dropped from hpo in round 17) in the real run with what the simulator
writes for the same trials.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import optuna
import yaml
from optuna.trial import FrozenTrial

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from bench.search.crosscheck import replayed, write_study  # noqa: E402
from bench.search.methods import methods_for  # noqa: E402
from bench.search.problems import PROBLEMS  # noqa: E402
from bench.search.recording import Recording, load  # noqa: E402
from bench.search.speed import speed_factor  # noqa: E402
from hpo.spec import load_study_spec  # noqa: E402
from hpo.storage.stop_rungs import EVALUATION_ATTR, FIRST_REPORT_ATTR  # noqa: E402
from hpo.storage.study_db import load_existing_study  # noqa: E402
from hpo.study import run_study  # noqa: E402

METHOD = "hpo: asha as written"  # reports every evaluation, as what ships does


def real_trials(
    recording: Recording, points: list[dict], folder: Path, save_strategy: str | None = None
) -> list[FrozenTrial]:
    method = next(m for m in methods_for(recording.problem) if m.name == METHOD)
    path = write_study(recording.problem, method, folder, points)
    if save_strategy is not None:  # the study's own otherwise (`best` on every recorded problem)
        data = yaml.safe_load(path.read_text())
        data["training"]["save_strategy"] = save_strategy
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    run_study(path, workers=1, dry_run=False)
    trials = load_existing_study(load_study_spec(path)).get_trials(deepcopy=False)
    return sorted(trials, key=lambda t: t.number)


def costs_of(recording: Recording, trials: list[FrozenTrial], factor: float) -> dict[str, list[float]]:
    """Per trial (the first left out), in the recording's seconds: the start inside the measured window, the cost of
    one report, the gap to the next trial; and the start measure, real and as the simulator writes it."""
    rows = replayed(recording, trials)
    out: dict[str, list[float]] = {"inside": [], "report": [], "gap": [], "real_ratio": [], "recorded": []}
    for index, (row, trial) in enumerate(zip(rows, trials, strict=True)):
        curve = recording.curves[row]
        first, interval = trial.user_attrs.get(FIRST_REPORT_ATTR), trial.user_attrs.get(EVALUATION_ATTR)
        if index == 0 or first is None or not interval:
            continue
        out["inside"].append(first / factor - curve.setup_s - curve.segment_s[0])
        out["report"].append(interval / factor - curve.segment_s[1])
        out["real_ratio"].append(first / interval)
        out["recorded"].append((curve.setup_s + curve.segment_s[0]) / curve.segment_s[1])
        following = trials[index + 1] if index + 1 < len(trials) else None
        if following is not None and trial.datetime_complete and following.datetime_start:
            gap = following.datetime_start - trial.datetime_complete
            out["gap"].append(gap.total_seconds() / factor)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--problem", default="fresh-diabetes", choices=sorted(PROBLEMS))
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0, help="which recorded configurations, in which order")
    parser.add_argument(
        "--start-s", type=float, default=0.2, help="the simulator's per-trial start (suite.py's)"
    )
    parser.add_argument(
        "--save-strategy",
        help="the trials' save_strategy instead of the study's (`no`: a report's cost without the checkpoint a "
        "new best writes under `best`)",
    )
    options = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    recording = load(PROBLEMS[options.problem])
    chosen = random.Random(options.seed).sample(range(len(recording.curves)), options.trials)
    factor = speed_factor(recording)
    folder = Path(tempfile.mkdtemp(prefix="search-trial-costs-"))
    try:
        points = [recording.curves[i].params for i in chosen]
        trials = real_trials(recording, points, folder, options.save_strategy)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    costs = costs_of(recording, trials, factor)
    median = {key: statistics.median(values) if values else float("nan") for key, values in costs.items()}
    print(
        f"{options.problem}: {len(costs['inside'])} trials, this machine {factor:.2f}x the recording; medians in the "
        f"recording's seconds: start inside the window {median['inside']:.3f} s, one report {median['report']:.3f} s, "
        f"between trials {median['gap']:.3f} s"
    )
    print(
        f"start measure (claim to first report / interval): real {median['real_ratio']:.2f}; the simulator writes "
        f"{statistics.median(sim_ratios(recording, trials, options.start_s)):.2f} at --start-s {options.start_s}, "
        f"{median['recorded']:.2f} with no start cost"
    )


def sim_ratios(recording: Recording, trials: list[FrozenTrial], start_s: float) -> list[float]:
    """What simulate.py writes for the same recorded configurations: (start_s + set-up + first segment) / second."""
    rows = replayed(recording, trials)[1:]
    return [
        (start_s + recording.curves[r].setup_s + recording.curves[r].segment_s[0])
        / recording.curves[r].segment_s[1]
        for r in rows
    ]


if __name__ == "__main__":
    main()
