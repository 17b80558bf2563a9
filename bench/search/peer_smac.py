"""SMAC3 (`smac`, the AutoML group's reference implementation) with its Hyperband intensifier on a recorded problem:
a peer run in its own environment, on the clock of peer_fidelity.py.

    python3 -m venv .venv-smac && PIP_CONFIG_FILE=/dev/null .venv-smac/bin/pip install smac==2.4.1 dehb==0.1.2
    python bench/search/suite.py --smac-python .venv-smac/bin/python      # adds "SMAC3 Hyperband" and "DEHB"

`MultiFidelityFacade` (a random forest over the study's space, with its conditions) with `Hyperband(eta=3)` from
`--min-fidelity` evaluations (the problem's first evaluation) to all of them, driven by ask and tell with N workers.
Each (configuration, budget) SMAC asks for is an evaluation from scratch (see peer_fidelity.py). SMAC minimises a
cost: minus the metric when the study maximises it.
Output: {"smac-hyperband": [{"seed", "trace", "trials", "resumes", "evaluations", "busy_s"}, ...]} on stdout.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer_configspace import as_params, configuration_space  # noqa: E402
from peer_fidelity import Mapper, arguments, recording, run_clock  # noqa: E402


def one_seed(options: Any, seed: int, data: tuple, folder: str) -> dict[str, Any]:
    from smac import MultiFidelityFacade, Scenario
    from smac.intensifier.hyperband import Hyperband
    from smac.runhistory.dataclasses import TrialValue

    params, values, segments, maximize = data
    space = json.loads(options.space)
    scenario = Scenario(
        configuration_space(space, seed),
        deterministic=True,
        n_trials=100_000,  # the simulated budget ends the run
        min_budget=options.min_fidelity,
        max_budget=values.shape[1],
        seed=seed,
        output_directory=Path(folder) / f"smac-{seed}",
    )
    facade = MultiFidelityFacade(
        scenario,
        lambda config, seed=0, budget=1: 0.0,  # never called: ask and tell
        intensifier=Hyperband(scenario, eta=options.eta, seed=seed),
        overwrite=True,
        logging_level=logging.ERROR,
    )
    sign = -1.0 if maximize else 1.0

    def ask() -> tuple[Any, dict[str, Any], float]:
        info = facade.ask()
        return info, as_params(info.config), float(info.budget)

    def tell(info: Any, value: float) -> None:
        facade.tell(info, TrialValue(cost=sign * value), save=False)

    return {"seed": seed, **run_clock(ask, tell, Mapper(space, params), values, segments, options)}


def main() -> None:
    options = arguments(__doc__).parse_args()
    logging.disable(logging.WARNING)
    data = recording(options)
    with tempfile.TemporaryDirectory() as folder, contextlib.redirect_stdout(sys.stderr):
        runs = [one_seed(options, seed, data, folder) for seed in range(options.seeds)]
    json.dump({"smac-hyperband": runs}, sys.stdout)


if __name__ == "__main__":
    main()
