"""The dry run keeps nothing of the model it evaluated: `hpo run` goes on to schedule the whole study in the same
process, and on a GPU whatever it kept (the model, or the memory PyTorch's caching allocator had reserved for it) is
memory no trial can use. An H200 showed `hpo run` holding 11.5 GiB for a whole study (2026-12-04)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from study_task import write_study

from hpo.scheduling.gpu_memory import read_gpu_memory
from hpo.spec import load_study_spec
from hpo.trial.dry_run import dry_run

TRACKED_TASK = """
import weakref
import study_task

BUILT = []


def model_init(params):
    model = study_task.model_init(params)
    BUILT.append(weakref.ref(model))
    return model
"""


def test_the_model_is_gone_once_the_dry_run_returns(tmp_path: Path):
    path = write_study(tmp_path)
    (tmp_path / "tracked_task.py").write_text(TRACKED_TASK)
    path.write_text(path.read_text().replace("study_task:model_init", "tracked_task:model_init"))
    spec = load_study_spec(path)

    assert "eval_accuracy" in dry_run(spec)

    tracked = sys.modules["tracked_task"]
    assert len(tracked.BUILT) == 1
    assert tracked.BUILT[0]() is None  # no garbage collection needed: nothing refers to it


BIG_TASK = """
import torch
import study_task


def model_init(params):
    model = study_task.model_init(params)
    model.register_buffer("ballast", torch.zeros(2**28))  # 1 GiB, moved to the GPU with the model
    return model
"""


@pytest.mark.skipif(not read_gpu_memory(), reason="NVML sees no GPU here")
def test_on_a_gpu_the_dry_run_gives_its_memory_back(tmp_path: Path):
    path = write_study(tmp_path)
    (tmp_path / "big_task.py").write_text(BIG_TASK)
    path.write_text(path.read_text().replace("study_task:model_init", "big_task:model_init"))
    script = (
        "import torch\n"
        "from hpo.spec import load_study_spec\n"
        "from hpo.trial.dry_run import dry_run\n"
        f"dry_run(load_study_spec({str(path)!r}))\n"
        "assert torch.cuda.is_initialized(), 'the dry run did not use the GPU'\n"
        "print(torch.cuda.memory_reserved())\n"
    )
    # its own process: CUDA started here would stay with the test process and its later forks
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    # the 1 GiB model is given back; what may stay is cuBLAS's workspace, which empty_cache leaves (a few MiB)
    assert int(done.stdout.strip().splitlines()[-1]) < 2**27
