"""Reading GPU memory through NVML: which devices CUDA_VISIBLE_DEVICES names, and a clean empty answer without NVML.

The mapping is checked against NVML-shaped device lists (a 4-GPU H100 machine, one GPU split into MIG instances);
the reading itself runs for real: on a machine without a driver (CI) it must answer [] and start no CUDA.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpo.scheduling.gpu_memory import NvmlDevice, read_gpu_memory, resolve_devices, visible_device_ids

ROOT = Path(__file__).resolve().parents[3]
UUIDS = [
    "GPU-5a3b8c1e-0f7d-2c4a-9e61-3b2f7d9c0a14",
    "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6",
    "GPU-8932ab01-1c2d-4e5f-a6b7-c8d9e0f1a2b3",  # shares the prefix GPU-8932 with the one before
    "GPU-c0ffee00-1111-2222-3333-444455556666",
]
MIG = "MIG-4b2e9c7a-6d1f-5e3b-8a90-1c2d3e4f5a6b"
MACHINE = [NvmlDevice(i, uuid) for i, uuid in enumerate(UUIDS)] + [NvmlDevice(3, MIG, mig=True)]


def indices(devices: list[NvmlDevice]) -> list[int]:
    return [device.index for device in devices]


def test_cuda_visible_devices_is_read_as_cuda_reads_it():
    assert visible_device_ids({}) is None  # unset: every GPU
    assert visible_device_ids({"CUDA_VISIBLE_DEVICES": ""}) == []  # set but empty: none
    assert visible_device_ids({"CUDA_VISIBLE_DEVICES": "2, 0"}) == ["2", "0"]


def test_indices_and_uuids_name_devices_in_the_order_given():
    assert indices(resolve_devices(None, MACHINE)) == [0, 1, 2, 3]  # MIG instances are not whole GPUs
    assert indices(resolve_devices(["2", "0"], MACHINE)) == [2, 0]
    assert indices(resolve_devices([3, 1], MACHINE)) == [3, 1]
    assert indices(resolve_devices([UUIDS[3], "GPU-5a3b"], MACHINE)) == [3, 0]  # a unique prefix is enough
    mig = resolve_devices([MIG], MACHINE)
    assert mig == [NvmlDevice(3, MIG, mig=True)]


def test_the_list_ends_at_the_first_id_that_names_no_single_device():
    assert indices(resolve_devices(["0", "-1", "1"], MACHINE)) == [0]  # CUDA ignores everything after -1
    assert indices(resolve_devices(["1", "7", "2"], MACHINE)) == [1]  # no GPU 7
    assert indices(resolve_devices(["GPU-8932", "0"], MACHINE)) == []  # an ambiguous prefix names none
    assert resolve_devices([], MACHINE) == []


def test_without_the_nvml_package_the_answer_is_empty(monkeypatch):
    # `import pynvml` then raises ImportError, as where nvidia-ml-py is not installed
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert read_gpu_memory() == []


def test_reading_starts_no_cuda_and_gives_consistent_figures_or_none():
    """In a fresh process: read every GPU, and check that torch (hence CUDA) was never imported."""
    code = (
        "import json, sys\n"
        "from hpo.scheduling.gpu_memory import read_gpu_memory\n"
        "gpus = read_gpu_memory()\n"
        "print(json.dumps({'torch': 'torch' in sys.modules, 'gpus': [g.__dict__ for g in gpus]}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["torch"] is False
    has_driver = shutil.which("nvidia-smi") is not None or Path("/dev/nvidiactl").exists()
    if not has_driver:
        assert answer["gpus"] == []
    for gpu in answer["gpus"]:
        assert gpu["uuid"].startswith(("GPU-", "MIG-")) and gpu["total"] > 0
        assert 0 <= gpu["free"] <= gpu["total"] and 0 <= gpu["used"] <= gpu["total"]


@pytest.mark.parametrize("visible", ["", "-1"])
def test_no_visible_device_means_no_figures(monkeypatch, visible):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert read_gpu_memory() == []
