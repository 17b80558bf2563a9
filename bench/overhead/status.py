"""How long `hpo status` takes to answer, against what a user of Optuna alone runs to see the same trials.

    python bench/overhead/status.py                    # 200 trials, 5 interleaved repeats
    python bench/overhead/status.py --trials 2000 --repeat 3

Builds a SQLite study of the example study's name and search space (real Optuna trials, complete and pruned, 10
intermediate values each; written once under the temp folder), then times, interleaved:
- `hpo status studies/digits_mlp.yaml --storage <that study>`: the trial table, rungs and slots as a user sees them;
- the baseline: a fresh `python -c` that loads the study with Optuna and prints each trial's number, state, value,
  parameters and duration (`trials_dataframe()` needs pandas, which the project does not install).
Each is a new process, as a user's command is, so imports count: what `hpo status` imports (torch is not among them)
is most of its time on a small study.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import optuna  # noqa: E402 - after the project's root is on sys.path, as every bench script
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution  # noqa: E402
from optuna.trial import TrialState, create_trial  # noqa: E402

from bench.common import hpo_command, load_average, timed  # noqa: E402

STUDY_FILE = "studies/digits_mlp.yaml"
STUDY_NAME = "digits_mlp"
DISTRIBUTIONS = {
    "learning_rate": FloatDistribution(3e-4, 3e-2, log=True),
    "weight_decay": FloatDistribution(1e-6, 1e-2, log=True),
    "hidden_size": IntDistribution(32, 256, step=32),
    "num_layers": IntDistribution(1, 3),
    "activation": CategoricalDistribution(["relu", "gelu", "tanh"]),
}


def build_study(trials: int) -> str:
    """A SQLite URL holding `trials` trials of the example study (built once per size, then reused)."""
    path = Path(tempfile.gettempdir()) / f"hpo-bench-status-{trials}.db"
    url = f"sqlite:///{path}"
    if path.exists():
        return url
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name=STUDY_NAME, storage=url + ".part", direction="maximize")
    generator = random.Random(0)
    for _ in range(trials):
        params = {name: _draw(generator, d) for name, d in DISTRIBUTIONS.items()}
        curve = {45 * (k + 1): generator.uniform(0.5, 0.98) for k in range(10)}
        pruned = generator.random() < 0.6
        study.add_trial(
            create_trial(
                state=TrialState.PRUNED if pruned else TrialState.COMPLETE,
                value=None if pruned else max(curve.values()),
                params=params,
                distributions=DISTRIBUTIONS,
                intermediate_values=curve,
            )
        )
    Path(str(path) + ".part").rename(path)  # a study cut short is never reused
    return url


def _draw(generator: random.Random, distribution: object) -> object:
    if isinstance(distribution, CategoricalDistribution):
        return generator.choice(distribution.choices)
    if isinstance(distribution, IntDistribution):
        steps = (distribution.high - distribution.low) // distribution.step
        return distribution.low + distribution.step * generator.randint(0, steps)
    return generator.uniform(distribution.low, distribution.high)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    url = build_study(options.trials)
    ours = [*hpo_command(), "status", STUDY_FILE, "--storage", url]
    baseline = [
        sys.executable,
        "-c",
        f"import optuna\nfor t in optuna.load_study(study_name={STUDY_NAME!r}, storage={url!r}).trials:\n"
        "    print(t.number, t.state.name, t.value, t.params, t.duration)",
    ]
    times: dict[str, list[float]] = {"hpo status": [], "optuna alone": []}
    for _ in range(options.repeat):  # interleaved: drift on a shared machine falls on both alike
        times["hpo status"].append(timed(ours))
        times["optuna alone"].append(timed(baseline))
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"{options.trials} trials, {options.repeat} repeats each, load average {load_average()}")
    for name, value in medians.items():
        print(f"  {name:<13} median {value:.2f} s  (runs: {', '.join(f'{t:.2f}' for t in times[name])})")
    print(f"hpo status / optuna alone: {medians['hpo status'] / medians['optuna alone']:.2f}x")


if __name__ == "__main__":
    main()
