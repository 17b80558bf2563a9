"""The commands with an output folder in a real S3 API on loopback (moto's server, `.ci/s3.sh`): the refusals before
anything starts (one line, exit 2, no secret printed), and `hpo train --resume` on a machine that holds nothing of the
run (its checkpoint comes from the store)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import s3fs
from study_task import write_study

from hpo.spec.output_url import mirror_name

pytestmark = pytest.mark.s3
ROOT = Path(__file__).resolve().parents[2]
RUN_FILE = ROOT / "studies" / "digits_mlp_run.yaml"
SHORT = ["--set", "training.num_train_epochs=2", "--set", "training.load_best_model_at_end=false"]


def _hpo(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "250", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "hpo.cli", *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _refused(done: subprocess.CompletedProcess, *words: str) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert all(word in lines[0] for word in words), lines[0]
    assert os.environ["AWS_SECRET_ACCESS_KEY"] not in done.stdout + done.stderr  # never printed
    return lines[0]


@pytest.mark.parametrize("launcher", [[], ["--launcher", "slurm", "--workers", "2"]])
def test_a_missing_bucket_and_an_unreachable_store_are_refused_before_anything_starts(
    tmp_path, s3_bucket, postgres_url, launcher
):
    write_study(tmp_path, study={"name": "refused", "n_trials": 2, "output_dir": "s3://no-such-bucket/study"})
    scratch = {"HPO_SCRATCH": str(tmp_path / "scratch")}
    missing = _hpo(tmp_path, "run", "study.yaml", "--storage", postgres_url, *launcher, env=scratch)
    line = _refused(missing, "study.output_dir", "bucket 'no-such-bucket' does not exist", "create it")
    assert "127.0.0.1" in line  # where it looked
    write_study(tmp_path, study={"name": "refused", "n_trials": 2, "output_dir": f"s3://{s3_bucket}/study"})
    unreachable = _hpo(
        tmp_path,
        "run",
        "study.yaml",
        "--storage",
        postgres_url,
        *launcher,
        env={**scratch, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"},
    )
    _refused(unreachable, "study.output_dir", "http://127.0.0.1:9 does not answer", "AWS_ENDPOINT_URL")
    mirrors = list((tmp_path / "scratch").glob("hpo-mirror-*"))
    assert all(not list(m.glob("trial-*")) and not (m / ".hpo" / "slurm").exists() for m in mirrors)
    assert not s3fs.S3FileSystem(skip_instance_cache=True).ls(s3_bucket)  # nothing written


def test_train_resumes_on_a_machine_that_holds_nothing_from_the_store(tmp_path, s3_bucket):
    url = f"s3://{s3_bucket}/runs/digits"
    first = {"HPO_SCRATCH": str(tmp_path / "a")}
    done = _hpo(ROOT, "train", str(RUN_FILE), "--output-dir", url, *SHORT, env=first)
    assert done.returncode == 0, done.stdout + done.stderr
    expected = json.loads((tmp_path / "a" / mirror_name(url) / "metrics.json").read_text())["final"]
    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    assert fs.exists(f"{s3_bucket}/runs/digits/checkpoint-45.complete")
    fs.rm(f"{s3_bucket}/runs/digits/checkpoint-90.complete")  # as if killed before its last upload finished
    again = _hpo(
        ROOT,
        "train",
        str(RUN_FILE),
        "--output-dir",
        url,
        *SHORT,
        "--resume",
        env={"HPO_SCRATCH": str(tmp_path / "b")},
    )
    assert again.returncode == 0, again.stdout + again.stderr
    resumed = json.loads((tmp_path / "b" / mirror_name(url) / "metrics.json").read_text())
    assert resumed["resumed_from"].endswith("checkpoint-45") and resumed["global_step"] == 90
    assert resumed["final"]["eval_loss"] == pytest.approx(expected["eval_loss"], abs=1e-6)
    assert fs.exists(
        f"{s3_bucket}/runs/digits/checkpoint-90.complete"
    )  # uploaded again by the second machine
    exported = _hpo(
        ROOT,
        "export",
        str(RUN_FILE),
        "--set",
        f"output_dir={url}",
        "--out",
        str(tmp_path / "export"),
        env={
            "HPO_SCRATCH": str(tmp_path / "c")
        },  # a third machine: the run's checkpoint comes from the store
    )
    assert exported.returncode == 0, exported.stdout + exported.stderr
    assert (tmp_path / "export" / "model.safetensors").is_file() and "difference" in exported.stdout
