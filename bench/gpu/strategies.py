"""Each strategy on one GPU over NCCL: step time and exact resume, in bf16 and fp16, against DDP.

    python bench/gpu/strategies.py                         # ddp, fsdp, zero2, zero3 x bf16, fp16 (on a GPU)
    python bench/gpu/strategies.py --setups ddp,zero3 --precisions bf16 --steps 40
    python bench/gpu/strategies.py --check                 # the commands only, and their arguments parsed (no GPU)
    python bench/gpu/strategies.py --cpu --precisions bf16 --hidden 64 --steps 8   # the whole flow on CPU (gloo)

Every run is `tests/distributed/job.py` (the distributed tests' job: an MLP classifier on generated data, the real
Trainer) with `--cuda`, as one rank started by plain `python`: a world of one with an NCCL process group, so the
strategy's own code (FSDP2 sharding, DeepSpeed's engine, its loss scaler) runs on the GPU. One GPU cannot show what
two ranks share (gradient all-reduce, sharded parameters gathered across ranks): that needs two GPUs.

For each setup and precision:
- reference: `--steps` steps, a checkpoint every half (`--save-steps steps/2`), one after another so that the step
  times compare (ms per optimizer step over the whole run, from the Trainer's train_runtime; DDP's is the baseline);
- resume: a new process from the reference's middle checkpoint to the end; the largest weight difference to the
  reference's final weights is the resume difference (0.0: exact). The resumes run side by side (they are not timed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "tests" / "distributed" / "job.py"
SETUPS = {
    "ddp": ["--strategy", "ddp"],
    "fsdp": ["--strategy", "fsdp"],
    "zero2": ["--strategy", "deepspeed", "--zero-stage", "2"],
    "zero3": ["--strategy", "deepspeed", "--zero-stage", "3"],
}
PRECISIONS = {"bf16": ["--bf16"], "fp16": ["--fp16"], "fp32": []}


@dataclass
class Outcome:
    setup: str
    precision: str
    ms_per_step: float | None = None
    resume_difference: float | None = None
    error: str = ""


def job_arguments(setup: str, precision: str, options: argparse.Namespace, out: Path) -> list[str]:
    return [
        str(JOB),
        "--out",
        str(out),
        *([] if options.cpu else ["--cuda"]),
        *SETUPS[setup],
        *PRECISIONS[precision],
        "--hidden",
        str(options.hidden),
        "--batch",
        str(options.batch),
        "--train-size",
        str(options.batch * options.steps),
        "--max-steps",
        str(options.steps),
        "--save-steps",
        str(options.steps // 2),
    ]


def run_job(arguments: list[str], out: Path, timeout: float) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop("MASTER_ADDR", None)  # a world of one: an in-memory store, no rendezvous
    try:
        done = subprocess.run(
            [sys.executable, *arguments], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout:.0f} s"
    out.mkdir(parents=True, exist_ok=True)
    (out / "job.log").write_text(done.stdout + done.stderr)
    return done.returncode, done.stdout + done.stderr


def last_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


def reference(setup: str, precision: str, options: argparse.Namespace, root: Path) -> Outcome:
    out = root / f"{setup}-{precision}-ref"
    code, output = run_job(job_arguments(setup, precision, options, out), out, options.timeout)
    outcome = Outcome(setup, precision)
    if code != 0:
        outcome.error = f"exit {code}: {last_line(output)}"
        return outcome
    result = json.loads((out / "result.json").read_text())
    outcome.ms_per_step = 1000 * float(result["train_runtime"]) / int(result["global_step"])
    return outcome


def resume(outcome: Outcome, options: argparse.Namespace, root: Path) -> Outcome:
    if outcome.error:
        return outcome
    ref = root / f"{outcome.setup}-{outcome.precision}-ref"
    out = root / f"{outcome.setup}-{outcome.precision}-resumed"
    middle = f"checkpoint-{options.steps // 2}"
    shutil.copytree(ref / "run" / middle, out / "run" / middle)
    arguments = [*job_arguments(outcome.setup, outcome.precision, options, out), "--resume"]
    code, output = run_job(arguments, out, options.timeout)
    if code != 0:
        outcome.error = f"resume exit {code}: {last_line(output)}"
        return outcome
    outcome.resume_difference = max_difference(ref / "final", out / "final")
    return outcome


def max_difference(a: Path, b: Path) -> float:
    from safetensors.torch import load_file  # torch only here: --check runs without a GPU stack

    left, right = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    return max((left[k].float() - right[k].float()).abs().max().item() for k in left)


def report(outcomes: list[Outcome]) -> None:
    print(f"\n{'strategy':<8} {'precision':<9} {'ms/step':>8} {'vs ddp':>7} {'resume max |dw|':>16}")
    for o in outcomes:
        if o.error and o.ms_per_step is None:
            print(f"{o.setup:<8} {o.precision:<9} failed: {o.error}")
            continue
        ddp = next((d.ms_per_step for d in outcomes if d.setup == "ddp" and d.precision == o.precision), None)
        ratio = f"{o.ms_per_step / ddp:.2f}x" if ddp and o.ms_per_step else "-"
        resumed = f"{o.resume_difference:.3g}" if o.resume_difference is not None else o.error or "-"
        print(f"{o.setup:<8} {o.precision:<9} {o.ms_per_step:>8.2f} {ratio:>7} {resumed:>16}")
    for o in outcomes:
        verdict = "failed" if o.error else ("exact" if o.resume_difference == 0.0 else "differs")
        print(
            f"== {o.setup} {o.precision}: {verdict}; ms/step {o.ms_per_step or 0:.2f}; "
            f"resume {o.resume_difference}{'; ' + o.error if o.error else ''}"
        )


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setups", default=",".join(SETUPS))
    parser.add_argument("--precisions", default="bf16,fp16")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--hidden", type=int, default=4096, help="the MLP's width (4096: 17M parameters)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per job")
    parser.add_argument("--check", action="store_true", help="print the commands and parse them; run nothing")
    parser.add_argument("--cpu", action="store_true", help="a dry run on CPU with gloo (bf16 and fp32 only)")
    options = parser.parse_args(argv)
    options.setups = [s for s in options.setups.split(",") if s]
    options.precisions = [p for p in options.precisions.split(",") if p]
    unknown = [s for s in options.setups if s not in SETUPS] + [
        p for p in options.precisions if p not in PRECISIONS
    ]
    if unknown:
        parser.error(
            f"unknown: {', '.join(unknown)}; setups {', '.join(SETUPS)}; precisions {', '.join(PRECISIONS)}"
        )
    if options.steps < 2:
        parser.error("--steps: at least 2 (the resume starts from the middle checkpoint)")
    return options


def check(options: argparse.Namespace) -> int:
    """Parse every job's arguments with the job's own parser (imports the Trainer; needs no GPU)."""
    sys.path[:0] = [str(ROOT), str(JOB.parent)]
    from job import parse as parse_job  # noqa: PLC0415  (the job module lives beside the tests, not in a package)

    for setup in options.setups:
        for precision in options.precisions:
            arguments = job_arguments(setup, precision, options, Path("/tmp/check"))
            parse_job([*arguments[1:], "--resume"])
            print(f"{setup} {precision}: python {' '.join(arguments)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    if options.check:
        return check(options)
    root = Path(tempfile.mkdtemp(prefix="gpu-strategies-"))
    started = time.perf_counter()
    combos = [(s, p) for p in options.precisions for s in options.setups]
    outcomes = [reference(s, p, options, root) for s, p in combos]  # one after another: timed
    with ThreadPoolExecutor(max_workers=len(outcomes)) as pool:  # side by side: not timed
        outcomes = list(pool.map(lambda o: resume(o, options, root), outcomes))
    report(outcomes)
    print(f"(jobs in {root}; {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
