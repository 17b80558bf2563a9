"""A transformers example script (run_glue.py's body) runs to its end with only the Trainer import changed, and
leaves the files transformers' Trainer leaves: train/eval/all_results.json, trainer_state.json, the model, a card."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

SCRIPT = Path(__file__).parent / "scripts" / "glue_style.py"


def run_script(*argv: str) -> subprocess.CompletedProcess:
    support = (
        Path(__file__).resolve().parents[1] / "support"
    )  # the script's tiny model and data (tiny_glue.py)
    path = os.pathsep.join(filter(None, [str(support), os.environ.get("PYTHONPATH", "")]))
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": path}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, timeout=300, env=environment
    )


@pytest.mark.slow  # 14 s on 2 cores: run by .ci/run's slow suite
def test_run_glue_body_trains_evaluates_predicts_and_writes_transformers_files(tmp_path):
    out = tmp_path / "out"
    done = run_script(
        "--output_dir", str(out), "--do_train", "--do_eval", "--do_predict", "--max_steps", "6",
        "--learning_rate", "1e-2", "--per_device_train_batch_size", "8", "--eval_strategy", "steps",
        "--eval_steps", "4", "--logging_steps", "2", "--save_steps", "3", "--disable_tqdm", "true",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]

    train = json.loads((out / "train_results.json").read_text())
    evaluation = json.loads((out / "eval_results.json").read_text())
    combined = json.loads((out / "all_results.json").read_text())
    assert {"train_loss", "train_runtime", "train_samples_per_second", "total_flos", "epoch"} <= set(train)
    assert train["train_samples"] == 64
    assert {"eval_loss", "eval_accuracy", "eval_runtime", "eval_samples", "epoch"} <= set(evaluation)
    assert evaluation["eval_samples"] == 16
    assert combined == {
        **train,
        **evaluation,
    }  # all_results.json merges both splits, as transformers writes it
    assert (out / "train_results.json").read_text().startswith('{\n    "')  # indent 4, sorted keys

    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 6 and state["max_steps"] == 6
    evals = [entry["step"] for entry in state["log_history"] if "eval_loss" in entry]
    assert evals == [
        4,
        6,
    ]  # every 4 steps, and at the end because step 6 is not an eval step (transformers 5)
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-3", "checkpoint-6"]

    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()
    lines = (out / "predict_results.txt").read_text().splitlines()
    assert lines[0] == "index\tprediction" and len(lines) == 17
    card = (out / "README.md").read_text()
    assert 'base_model: "tiny-bert"' in card and "| 4 |" in card

    # the console table of log_metrics, as transformers prints it
    assert "***** train metrics *****" in done.stdout and "***** eval metrics *****" in done.stdout
    assert any(
        line.strip().startswith("eval_accuracy") and " = " in line for line in done.stdout.splitlines()
    )


def test_push_to_hub_is_refused_in_one_line_before_anything_runs(tmp_path):
    done = run_script(
        "--output_dir", str(tmp_path), "--do_train", "--push_to_hub", "true", "--max_steps", "1"
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "push_to_hub" in last and "offline" in last
    assert not list(tmp_path.iterdir())  # refused when the arguments were parsed: nothing trained or written
