"""Export after 2-rank trainings: an FSDP run whose checkpoints hold only per-rank shards, and a DeepSpeed ZeRO-3 run.
Either way the export is one consolidated `model.safetensors` that reloads in one process and reproduces the metric."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file

import hpo
from hpo.export.write import export_run
from hpo.spec import load_run_spec

pytestmark = pytest.mark.distributed

ROOT = Path(__file__).resolve().parents[3]
RUN_FILE = ROOT / "studies" / "digits_mlp_run.yaml"
QUICK = [
    "training.max_steps=12",
    "training.eval_strategy=steps",
    "training.eval_steps=12",
    "training.save_strategy=steps",
    "training.save_steps=12",
    "training.load_best_model_at_end=false",
    "model.hidden_size=32",
]


def train_on_two_ranks(output_dir: Path, overrides: list[str], strategy: str) -> None:
    sets = [f"--set={item}" for item in [*QUICK, *overrides]]
    command = [sys.executable, "-m", "hpo.cli", "train", str(RUN_FILE), *sets, "--nproc", "2"]
    command += ["--strategy", strategy, f"--output-dir={output_dir}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-5000:]


def export_and_check(run_dir: Path, out: Path, overrides: list[str]) -> None:
    spec = load_run_spec(RUN_FILE, overrides=[*QUICK, *overrides], output_dir=run_dir)
    result = export_run(spec, out)

    assert [p.name for p in out.glob("*.safetensors")] == ["model.safetensors"]
    weights = load_file(str(out / "model.safetensors"))
    model = hpo.load_exported(out)
    assert set(weights) == set(model.state_dict())
    assert weights["net.0.weight"].shape == (32, 64), "the shards are joined into the full weight"
    assert result.reloaded["eval_accuracy"] == pytest.approx(result.recorded["eval_accuracy"], abs=1e-6)
    assert json.loads((out / "export.json").read_text())["step"] == 12


def test_export_after_fsdp_with_sharded_checkpoints_is_one_consolidated_file(tmp_path):
    sharded = ["training.fsdp_config={state_dict_type: SHARDED_STATE_DICT}"]
    train_on_two_ranks(tmp_path / "run", sharded, "fsdp")
    checkpoint = tmp_path / "run" / "checkpoint-12"
    shards = sorted(p.name for p in checkpoint.glob("*.safetensors"))
    assert shards == ["fsdp_shard_rank0.safetensors", "fsdp_shard_rank1.safetensors"], (
        "only shards were saved"
    )

    export_and_check(tmp_path / "run", tmp_path / "export", sharded)


def test_export_after_deepspeed_zero3_is_one_consolidated_file(tmp_path):
    zero3 = ["training.deepspeed={zero_optimization: {stage: 3}}"]
    train_on_two_ranks(tmp_path / "run", zero3, "deepspeed")
    assert (tmp_path / "run" / "checkpoint-12" / "deepspeed").is_dir()

    export_and_check(tmp_path / "run", tmp_path / "export", zero3)
