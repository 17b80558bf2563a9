"""prepare_for_fork: a parent that forks short runs (a study's worker) does the first Trainer's one-time work once, so
a child's training imports nothing and resolves no annotations of its own."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

TESTS = Path(__file__).resolve().parent

CHILD = textwrap.dedent(
    """
    import json, os, sys
    import torch
    from trainer import Trainer, TrainingArguments, prepare_for_fork
    from trainer.args import field_types
    from trainer_tasks import DropoutMLP, Regression

    torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))])  # what the worker's warm-up does first
    if sys.argv[1] == "prepared":
        prepare_for_fork()
    data = Regression()
    read, write = os.pipe()
    if os.fork() == 0:  # the trial process: one short run with an evaluation and a checkpoint
        before = set(sys.modules)
        resolved_before = field_types.cache_info().currsize
        args = TrainingArguments(
            output_dir=sys.argv[2], max_steps=2, per_device_train_batch_size=16, eval_strategy="steps",
            eval_steps=2, save_strategy="steps", save_steps=2, report_to=[], disable_tqdm=True, use_cpu=True,
        )
        Trainer(model=DropoutMLP(), args=args, train_dataset=data, eval_dataset=data).train()
        report = {"imported": sorted(set(sys.modules) - before), "resolved_before": resolved_before}
        os.write(write, json.dumps(report).encode())
        os._exit(0)
    os.close(write)
    print(os.read(read, 1 << 20).decode())
    """
)


def run_child(mode: str, tmp_path: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(tmp_path / mode)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": f"{TESTS}:{TESTS.parent.parent}", "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_child_forked_after_prepare_for_fork_trains_without_importing_anything(tmp_path):
    prepared = run_child("prepared", tmp_path)
    assert prepared["resolved_before"] == 1
    assert not {"torch.utils.serialization", "torch.profiler._cupti_monitor", "numpy.ctypeslib"} & set(
        prepared["imported"]
    )
    # A GPU machine may import CUDA helpers on first use, which is not the warm-up's work.
    if not torch.cuda.is_available():
        assert prepared["imported"] == []


def test_without_it_the_child_pays_for_the_lazy_imports_itself(tmp_path):
    # The baseline the test above is measured against: without it, that test could pass on an empty comparison.
    cold = run_child("cold", tmp_path)
    assert cold["resolved_before"] == 0 and cold["imported"], cold
