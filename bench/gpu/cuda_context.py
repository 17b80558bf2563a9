"""What CUDA costs a trial that starts in a new process, and whether a warm worker can spare it (GPU only).

    python bench/gpu/cuda_context.py --repeats 5

A study's worker forks one child per trial (or per resume). The child pays for the CUDA context (driver, context,
the caching allocator) and for cuBLAS's handle on its first matrix product. Four ways a trial can start, timed to its
first finished matrix product on the GPU, median over the repeats:
  spawn      a new interpreter: import torch, then CUDA (what a fresh `python train.py` pays)
  fork-cold  a child forked from a worker that imported torch but never touched CUDA (what hpo's workers do)
  fork-warm  a child forked from a worker that had already made a CUDA context: CUDA refuses it in the child
             ("Cannot re-initialize CUDA in forked subprocess"), which is why a worker must not warm CUDA up itself
  in-place   a second trial in the process that ran the first (a promoted trial that trains on in place)
The ratios are against spawn, measured in the same run.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import time

CHILD_CODE = """
import time
start = time.perf_counter()
import torch
imported = time.perf_counter()
a = torch.randn(256, 256, device="cuda")
(a @ a).sum().item()
done = time.perf_counter()
print(f"{imported - start:.4f} {done - imported:.4f}")
"""


def first_product_seconds() -> float:
    """Seconds from here to a finished matrix product on the GPU (context, allocator, cuBLAS handle included)."""
    import torch

    start = time.perf_counter()
    a = torch.randn(256, 256, device="cuda")
    (a @ a).sum().item()
    return time.perf_counter() - start


def spawn_once() -> tuple[float, float, float]:
    """(whole wall s, import torch s, first GPU product s) of a new interpreter."""
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD_CODE], capture_output=True, text=True, check=True)
    whole = time.perf_counter() - start
    imported, cuda = (float(x) for x in out.stdout.split())
    return whole, imported, cuda


def _child(queue: multiprocessing.Queue) -> None:
    try:
        queue.put(("ok", first_product_seconds()))
    except RuntimeError as error:  # CUDA refuses a context in a child forked after the parent made one
        queue.put(("refused", str(error).splitlines()[0]))


def fork_once() -> tuple[str, object]:
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    start = time.perf_counter()
    process = context.Process(target=_child, args=(queue,))
    process.start()
    status, value = queue.get(timeout=120)
    process.join()
    whole = time.perf_counter() - start
    return status, whole if status == "ok" else value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    options = parser.parse_args()
    # torch.cuda.is_available() would otherwise start the CUDA runtime here, and every fork after it would be refused:
    # NVML answers the question without that (a worker that forks trials must ask this way, or not at all).
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    import torch

    if not torch.cuda.is_available():
        parser.error("no CUDA GPU is visible to torch here")
    spawn_whole, spawn_import, spawn_cuda, fork_cold = [], [], [], []
    for _ in range(options.repeats):  # interleaved, so load hits both alike
        whole, imported, cuda = spawn_once()
        spawn_whole.append(whole)
        spawn_import.append(imported)
        spawn_cuda.append(cuda)
        status, value = fork_once()
        if status != "ok":
            parser.exit(1, f"fork-cold refused, though this process made no CUDA context: {value}\n")
        fork_cold.append(value)
    first = first_product_seconds()  # this process now holds a context, as a worker that warmed CUDA would
    in_place = [first_product_seconds() for _ in range(options.repeats)]
    warm_status, warm_value = fork_once()
    base = statistics.median(spawn_whole)
    print(
        f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, {options.repeats} repeats, median seconds"
    )
    print(
        f"spawn      {base:.3f} s to the first GPU product (import torch {statistics.median(spawn_import):.3f} s, "
        f"CUDA {statistics.median(spawn_cuda):.3f} s)"
    )
    print(
        f"fork-cold  {statistics.median(fork_cold):.3f} s  ratio {statistics.median(fork_cold) / base:.2f}x spawn"
    )
    print(f"fork-warm  {warm_status}: {warm_value}")
    print(
        f"in-place   {statistics.median(in_place):.5f} s  ratio {statistics.median(in_place) / base:.4f}x spawn"
    )
    print(f"(this process's own first context: {first:.3f} s)")


if __name__ == "__main__":
    main()
