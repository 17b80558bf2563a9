"""`hpo train run.yaml` on 2 CPU ranks: started by its own --nproc, by torchrun, by `accelerate launch` and by the
deepspeed launcher. Each must train as 2 ranks (a checkpoint holds both ranks' RNG files) and exit 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from launchers import tool

pytestmark = pytest.mark.distributed

ROOT = Path(__file__).resolve().parents[2]
RUN_FILE = ROOT / "studies" / "digits_mlp_run.yaml"
# 12 short steps, one checkpoint at the end, no evaluation: the point is the launch, not the model.
QUICK = [
    "--set=training.max_steps=12",
    "--set=training.eval_strategy='no'",
    "--set=training.save_strategy=steps",
    "--set=training.save_steps=12",
    "--set=training.load_best_model_at_end=false",
    "--set=tracking.store=false",
    "--set=training.use_cpu=true",  # 2 CPU ranks, also where a GPU is present
]
HPO_TRAIN = ["-m", "hpo.cli", "train", str(RUN_FILE), *QUICK]


def run(command: list[str], timeout: int = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def assert_trained_on_two_ranks(done: subprocess.CompletedProcess, output_dir: Path) -> Path:
    assert done.returncode == 0, (done.stdout + done.stderr)[-5000:]
    checkpoint = output_dir / "checkpoint-12"
    assert (checkpoint / "rng_state.pth").is_file() and (checkpoint / "rng_state_1.pth").is_file()
    assert json.loads((output_dir / "metrics.json").read_text())["global_step"] == 12
    assert (done.stdout + done.stderr).count("metrics written to") == 1, "only rank 0 prints the summary"
    return checkpoint


def test_hpo_train_nproc_starts_the_ranks_itself(tmp_path):
    done = run([sys.executable, *HPO_TRAIN, "--nproc", "2", "--strategy", "ddp", f"--output-dir={tmp_path}"])
    assert_trained_on_two_ranks(done, tmp_path)


def test_hpo_train_under_torchrun(tmp_path):
    torchrun = tool("torchrun")
    done = run([torchrun, "--standalone", "--nproc-per-node=2", *HPO_TRAIN, f"--output-dir={tmp_path}"])
    assert_trained_on_two_ranks(done, tmp_path)


def test_hpo_train_under_accelerate_launch(tmp_path):
    accelerate = tool("accelerate")
    command = [
        accelerate,
        "launch",
        "--multi_gpu",
        "--num_processes=2",
        "--num_machines=1",
        "--mixed_precision=no",
        "--dynamo_backend=no",
        *HPO_TRAIN,
        f"--output-dir={tmp_path}",
    ]
    assert_trained_on_two_ranks(run(command), tmp_path)


def test_hpo_train_under_the_deepspeed_launcher(tmp_path):
    from trainer.launch import free_port

    port = free_port()  # not the default 29500, which other jobs on this machine may be using
    deepspeed = tool("deepspeed")
    command = [
        deepspeed,
        "--num_accelerators=2",
        f"--master_port={port}",
        "--no_local_rank",
        "--module",
        *HPO_TRAIN[1:],
        "--strategy=deepspeed",
        f"--output-dir={tmp_path}",
    ]
    try:
        checkpoint = assert_trained_on_two_ranks(run(command), tmp_path)
    finally:
        # The deepspeed launcher kills its ranks at the end, so their shared-memory segments (2 x 66 MiB) stay behind.
        for segment in Path("/dev/shm").glob(f"deepspeed_allreduce_buffer_{os.getuid()}_127.0.0.1_{port}_*"):
            segment.unlink(missing_ok=True)
    assert (checkpoint / "deepspeed").is_dir(), "DeepSpeed's own checkpoint files are in the checkpoint"


def test_hpo_train_across_two_nodes(tmp_path):
    """Two `hpo train --nnodes 2` commands, one per node (here both on this machine, one rank each), form one job."""
    from trainer.launch import free_port

    port = str(free_port())
    node = [sys.executable, *HPO_TRAIN, "--nnodes=2", "--master-addr=127.0.0.1", f"--master-port={port}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    second = subprocess.Popen(
        [*node, "--node-rank=1", f"--output-dir={tmp_path}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        first = run([*node, "--node-rank=0", f"--output-dir={tmp_path}"])
        second_output, _ = second.communicate(timeout=120)
    finally:
        second.kill()
    assert second.returncode == 0, second_output[-5000:]
    assert_trained_on_two_ranks(first, tmp_path)


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--nproc", "0"], "--nproc must be at least 1"),
        (["--nnodes", "2", "--node-rank", "2"], "--node-rank"),
    ],
)
def test_bad_launch_flags_exit_2_naming_the_flag(tmp_path, flags, message):
    done = run([sys.executable, *HPO_TRAIN, *flags, f"--output-dir={tmp_path}"], timeout=60)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


def test_a_usage_error_inside_the_ranks_still_exits_2(tmp_path):
    """The run file parses, but its task names a function that does not exist: found only when the ranks import it."""
    done = run(
        [
            sys.executable,
            *HPO_TRAIN,
            "--set=task.data=studies.tasks.digits:no_such_function",
            "--nproc=2",
            f"--output-dir={tmp_path}",
        ]
    )
    assert done.returncode == 2, (done.stdout + done.stderr)[-3000:]
    assert "no_such_function" in done.stderr
    assert "rank 0 failed first" in done.stderr or "rank 1 failed first" in done.stderr


def test_ctrl_c_of_hpo_train_nproc_saves_on_every_rank_says_so_once_and_resumes(tmp_path):
    """The terminal's Ctrl-C reaches the launcher only (torch elastic starts each rank in a session of its own): every
    rank saves at the same step, the command says it in one line with the command that continues, and exits 130."""
    long_run = [
        sys.executable,
        *HPO_TRAIN,
        "--set=training.max_steps=20000",
        "--set=training.save_steps=40",
        "--set=training.disable_tqdm=true",
        "--nproc=2",
        "--strategy=ddp",
        f"--output-dir={tmp_path}",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    launcher = subprocess.Popen(
        long_run, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 180
        while not (tmp_path / "checkpoint-40").is_dir() and time.monotonic() < deadline:
            time.sleep(0.1)
        launcher.send_signal(signal.SIGINT)
        output, _ = launcher.communicate(timeout=120)
    finally:
        launcher.kill()
    assert launcher.returncode == 130, output[-3000:]
    stops = [line for line in output.splitlines() if line.startswith("stopped at step ")]
    assert len(stops) == 1 and "Traceback" not in output and "SignalException" not in output, output[-3000:]
    step = int(stops[0].split()[3].rstrip(":"))
    checkpoint = tmp_path / f"checkpoint-{step}"
    assert f"saved {checkpoint}; continue with: hpo train " in stops[0] and stops[0].endswith("--resume")
    assert (checkpoint / "rng_state.pth").is_file() and (checkpoint / "rng_state_1.pth").is_file()

    resumed = run([*long_run, "--resume", f"--set=training.max_steps={step + 8}"])
    assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-3000:]
    assert json.loads((tmp_path / "metrics.json").read_text())["global_step"] == step + 8
