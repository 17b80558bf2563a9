"""DEHB (`dehb`, differential evolution with Hyperband, the AutoML group's reference implementation) on a recorded
problem: a peer run in its own environment (the SMAC3 one, peer_smac.py), on the clock of peer_fidelity.py.

`DEHB(min_fidelity=--min-fidelity evaluations, max_fidelity=all, eta=3, n_workers=N)` driven by ask and tell: each
(configuration, fidelity) is an evaluation from scratch (see peer_fidelity.py); DEHB's fidelities are real numbers
and are rounded up to a whole evaluation. DEHB minimises its fitness: minus the metric when the study maximises it.
Output: {"dehb": [{"seed", "trace", "trials", "resumes", "evaluations", "busy_s"}, ...]} on stdout.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer_configspace import as_params, configuration_space  # noqa: E402
from peer_fidelity import Mapper, arguments, recording, run_clock  # noqa: E402


def one_seed(options: Any, seed: int, data: tuple, folder: str) -> dict[str, Any]:
    from dehb import DEHB

    params, values, segments, maximize = data
    space = json.loads(options.space)
    optimiser = DEHB(
        cs=configuration_space(space, seed),
        min_fidelity=options.min_fidelity,
        max_fidelity=values.shape[1],
        eta=options.eta,
        # 1: DEHB starts a Dask cluster for more, which only its own run() loop uses; ask and tell serve any
        # number of jobs in flight (its bracket manager counts the ones registered and not yet told)
        n_workers=1,
        seed=seed,
        output_path=os.path.join(folder, f"dehb-{seed}"),
        log_level="ERROR",
        save_freq=None,
    )
    sign = -1.0 if maximize else 1.0

    def ask() -> tuple[Any, dict[str, Any], float]:
        job = optimiser.ask()
        return job, as_params(job["config"]), float(job["fidelity"])

    def tell(job: Any, value: float) -> None:
        optimiser.tell(job, {"fitness": sign * value, "cost": 1.0})

    return {"seed": seed, **run_clock(ask, tell, Mapper(space, params), values, segments, options)}


def main() -> None:
    options = arguments(__doc__).parse_args()
    logging.disable(logging.WARNING)
    data = recording(options)
    with tempfile.TemporaryDirectory() as folder, contextlib.redirect_stdout(sys.stderr):
        runs = [one_seed(options, seed, data, folder) for seed in range(options.seeds)]
    json.dump({"dehb": runs}, sys.stdout)


if __name__ == "__main__":
    main()
