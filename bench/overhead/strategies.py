"""Step time and memory per rank of each strategy, as ratios to a single process, on a ~50M-parameter model.

    OMP_NUM_THREADS=1 python bench/overhead/strategies.py            # about 3 minutes on 2 CPU cores
    python bench/overhead/strategies.py --setups single,ddp --steps 3

Every setup trains the same model (a 12-layer MLP of 2048-wide layers, 50.4M parameters, AdamW, fp32) with the same
per-rank batch through the strategy interface the Trainer uses (setup, backward, clip, step). Two ranks run on 2 CPU
cores with gloo, one thread each, like the single process. Measured per rank:
- model state: bytes of the parameters, gradients and optimizer state this rank holds after a step (counted from the
  tensors, each storage once: what sharding saves);
- peak RSS: the process's peak resident memory (includes torch itself, and the full model each rank builds before
  sharding);
- step time: median wall time of an optimizer step after warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import torch

ROOT = Path(__file__).resolve().parents[2]
SETUPS = {
    "single": {"strategy": "single", "nproc": 1},
    "ddp": {"strategy": "ddp", "nproc": 2},
    "fsdp": {"strategy": "fsdp", "nproc": 2},
    "zero2": {"strategy": "deepspeed", "nproc": 2, "stage": 2},
    "zero3": {"strategy": "deepspeed", "nproc": 2, "stage": 3},
}
WIDTH, DEPTH, BATCH = 2048, 12, 8


def build_model() -> torch.nn.Module:
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(DEPTH):
        layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.GELU()]
    return torch.nn.Sequential(*layers)


def arguments(setup: dict) -> SimpleNamespace:
    deepspeed = {"zero_optimization": {"stage": setup["stage"]}} if "stage" in setup else None
    return SimpleNamespace(
        strategy=setup["strategy"],
        per_device_train_batch_size=BATCH,
        per_device_eval_batch_size=BATCH,
        gradient_accumulation_steps=1,
        learning_rate=1e-4,
        weight_decay=0.0,
        adam_beta1=0.9,
        adam_beta2=0.999,
        adam_epsilon=1e-8,
        max_grad_norm=1.0,
        bf16=False,
        fp16=False,
        max_steps=-1,
        warmup_steps=0,
        warmup_ratio=0.0,
        dataloader_drop_last=False,
        ddp_timeout=600,
        fsdp_config={"transformer_layer_cls_to_wrap": ["Linear"]} if setup["strategy"] == "fsdp" else None,
        deepspeed=deepspeed,
        ddp_find_unused_parameters=None,
        ddp_bucket_cap_mb=None,
        save_only_model=False,
        use_cpu=True,
    )


def model_state_bytes(model: torch.nn.Module, optimizer: object) -> int:
    """Bytes of the distinct storages behind parameters, gradients and optimizer state on this rank."""
    seen: dict[int, int] = {}

    def add(tensor: object) -> None:
        if isinstance(tensor, torch.Tensor):
            local = tensor.to_local() if hasattr(tensor, "to_local") else tensor
            storage = local.untyped_storage()
            seen[storage.data_ptr()] = max(seen.get(storage.data_ptr(), 0), storage.nbytes())

    for param in model.parameters():
        add(getattr(param, "ds_tensor", None) if hasattr(param, "ds_tensor") else param)
        add(param.grad)
    inner = optimizer
    while inner is not None:
        for group in getattr(inner, "param_groups", []):
            for param in group["params"]:
                add(param)
                add(param.grad)
        for state in getattr(inner, "state", {}).values():
            for value in state.values() if isinstance(state, dict) else ():
                add(value)
        for name in ("single_partition_of_fp32_groups", "fp32_partitioned_groups_flat", "averaged_gradients"):
            for tensor in _flatten(getattr(inner, name, None)):
                add(tensor)
        inner = getattr(inner, "optimizer", None)
    return sum(seen.values())


def _flatten(value: object) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _flatten(item)]
    return []


def worker(name: str, steps: int, out: Path) -> None:
    """One rank: train `steps` steps of the setup and write this rank's figures."""
    from trainer.strategies import create_strategy

    strategy = create_strategy(arguments(SETUPS[name]))
    strategy.setup_environment()
    model, optimizer, _ = strategy.setup(
        build_model(), lambda m: torch.optim.AdamW(m.parameters(), lr=1e-4), lambda o: None
    )
    generator = torch.Generator().manual_seed(strategy.rank)
    inputs = torch.randn(BATCH, WIDTH, generator=generator)
    times, state_bytes = [], 0
    for _ in range(steps):
        start = time.perf_counter()
        with strategy.no_backward_sync(model, enabled=False):
            loss = model(inputs).float().pow(2).mean()
            strategy.backward(loss, model, optimizer)
        strategy.clip_grad_norm(model, optimizer, 1.0)
        strategy.optimizer_step(model, optimizer)
        state_bytes = max(state_bytes, model_state_bytes(model, optimizer))  # gradients still held here
        optimizer.zero_grad(set_to_none=True)
        strategy.barrier()
        times.append(time.perf_counter() - start)
    figures = {
        "rank": strategy.rank,
        "step_s": statistics.median(times[2:] or times),
        "state_mb": state_bytes / 2**20,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "params_m": sum(p.numel() for p in build_model().parameters()) / 1e6,
    }
    (out / f"{name}-rank{strategy.rank}.json").write_text(json.dumps(figures))
    strategy.teardown()


def run_setup(name: str, steps: int, out: Path) -> list[dict]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    script = [str(Path(__file__).resolve()), "--worker", name, "--steps", str(steps), "--out", str(out)]
    nproc = SETUPS[name]["nproc"]
    launcher = (
        [sys.executable] if nproc == 1 else [sys.executable, "-m", "trainer.launch", "--nproc", str(nproc)]
    )
    done = subprocess.run(launcher + script, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed:\n{(done.stdout + done.stderr)[-4000:]}")
    return [json.loads((out / f"{name}-rank{r}.json").read_text()) for r in range(nproc)]


def report(results: dict[str, list[dict]]) -> str:
    base = results["single"][0] if "single" in results else None
    lines = [
        f"model: {next(iter(results.values()))[0]['params_m']:.1f}M parameters, fp32, AdamW, batch {BATCH} per rank",
        f"{'setup':<8}{'ranks':>6}{'step s':>9}{'x single':>10}{'state MB/rank':>15}{'x single':>10}"
        f"{'peak RSS MB/rank':>18}{'x single':>10}",
    ]
    for name, ranks in results.items():
        step = max(r["step_s"] for r in ranks)
        state = max(r["state_mb"] for r in ranks)
        rss = max(r["peak_rss_mb"] for r in ranks)
        ratios = [
            f"{v / b:.2f}" if base else "-"
            for v, b in (
                (step, base and base["step_s"]),
                (state, base and base["state_mb"]),
                (rss, base and base["peak_rss_mb"]),
            )
        ]
        lines.append(
            f"{name:<8}{len(ranks):>6}{step:>9.3f}{ratios[0]:>10}{state:>15.0f}{ratios[1]:>10}"
            f"{rss:>18.0f}{ratios[2]:>10}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--setups", default=",".join(SETUPS))
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.worker:
        worker(options.worker, options.steps, Path(options.out))
        return
    names = [n.strip() for n in options.setups.split(",") if n.strip()]
    unknown = sorted(set(names) - set(SETUPS))
    if unknown:
        raise SystemExit(f"--setups: unknown {unknown}; choose from {sorted(SETUPS)}")
    with tempfile.TemporaryDirectory() as folder:
        results = {}
        for name in names:
            started = time.perf_counter()
            results[name] = run_setup(name, options.steps, Path(folder))
            print(f"  {name}: done in {time.perf_counter() - started:.0f}s", file=sys.stderr, flush=True)
    print(report(results))


if __name__ == "__main__":
    main()
