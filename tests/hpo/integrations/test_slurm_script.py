"""The SLURM job script built from `resources:` and `launcher:` (text only; the slurm suite submits real ones), and the
launcher section's checks."""

from __future__ import annotations

import copy
import shlex
from pathlib import Path

import pytest

from hpo.errors import ConfigError
from hpo.integrations.slurm import (
    STORAGE_VARIABLE,
    UNKNOWN,
    SlurmJob,
    _parse_task_lines,
    job_script,
    require_sbatch,
    task_states,
)
from hpo.spec import SpecError, parse_study_spec

STUDY = {
    "study": {"name": "digits", "metric": "accuracy", "n_trials": 8, "output_dir": "/data/runs/digits"},
    "task": {
        "model_init": "studies.tasks.digits:model_init",
        "data": "studies.tasks.digits:data",
        "compute_metrics": "studies.tasks.digits:compute_metrics",
    },
    "training": {"eval_strategy": "epoch", "num_train_epochs": 1},
    "search_space": {"learning_rate": {"type": "float", "low": 1e-4, "high": 1e-1, "log": True}},
}


def script(workdir: Path = Path("/home/me/project"), tasks: int = 4, **sections) -> str:
    data = copy.deepcopy(STUDY)
    data.update(sections)
    spec = parse_study_spec(data, source="study.yaml")
    job = SlurmJob(
        spec,
        Path("/home/me/project/study.yaml"),
        tasks=tasks,
        overrides=("training.max_steps=50", "study.name=a b"),
        n_trials=8,
        python="/venv/bin/python",
        workdir=workdir,
    )
    return job_script(job)


def directives(text: str) -> list[str]:
    return [line.removeprefix("#SBATCH ") for line in text.splitlines() if line.startswith("#SBATCH ")]


def command(text: str) -> list[str]:
    [line] = [line for line in text.splitlines() if line.startswith("exec ")]
    return shlex.split(line.removeprefix("exec "))


def test_a_cpu_study_asks_for_one_trials_cores_per_task_and_runs_one_cpu_slot():
    text = script(resources={"threads_per_trial": 2, "ranks_per_trial": 2})
    options = directives(text)
    assert options[:4] == [
        "--job-name=hpo-digits",
        "--array=0-3",
        "--output=/data/runs/digits/.hpo/slurm/%A_%a.out",
        "--error=/data/runs/digits/.hpo/slurm/%A_%a.err",
    ]
    assert "--cpus-per-task=4" in options  # 2 threads x 2 ranks
    assert "--chdir=/home/me/project" in options and "--signal=B:USR1@60" in options
    assert not any(option.startswith("--gpus") for option in options)
    words = command(text)
    assert words[:5] == ["/venv/bin/python", "-m", "hpo.cli", "worker", "/home/me/project/study.yaml"]
    assert words[words.index("--workers") + 1] == "1"
    assert words[words.index("--n-trials") + 1] == "8"
    assert ["--set", "study.name=a b"] == words[
        words.index("study.name=a b") - 1 : words.index("study.name=a b") + 1
    ]
    assert "resources.threads_per_trial=2" not in words  # the file's own value stands


def test_without_threads_per_trial_the_task_uses_its_cpus_not_the_nodes():
    words = command(script(launcher={"cpus_per_task": 6}))
    assert "resources.threads_per_trial=6" in words


def test_gpus_time_partition_and_extra_options_come_from_the_launcher_section():
    text = script(
        resources={"gpus_per_trial": 2},
        launcher={
            "type": "slurm",
            "gpus": True,
            "partition": "gpu",
            "time": "1-12:00",
            "account": "proj",
            "qos": "high",
            "mem": "64G",
            "signal_grace": 120,
            "sbatch_options": ["--constraint=a100", "--exclusive"],
        },
    )
    options = directives(text)
    for expected in (
        "--gpus-per-task=2",
        "--partition=gpu",
        "--time=1-12:00",
        "--account=proj",
        "--qos=high",
        "--mem=64G",
        "--signal=B:USR1@120",
        "--constraint=a100",
        "--exclusive",
    ):
        assert expected in options, (expected, options)
    assert "--workers" not in command(text)  # a GPU task runs the slots of the GPUs SLURM gave it


def test_the_storage_url_is_read_from_the_environment_not_written_in_the_script():
    text = script()
    assert text.splitlines()[-1].endswith(f'--storage "${STORAGE_VARIABLE}"')
    assert "postgresql" not in text


@pytest.mark.parametrize(
    ("launcher", "field", "words"),
    [
        ({"partiton": "gpu"}, "launcher.partiton", "unknown"),
        ({"time": "2 hours"}, "launcher.time", "h:mm:ss"),
        ({"mem": "lots"}, "launcher.mem", "32G"),
        ({"sbatch_options": ["--array=0-9"]}, "launcher.sbatch_options", "--workers"),
        ({"sbatch_options": ["--time=10"]}, "launcher.sbatch_options", "launcher.time"),
        ({"sbatch_options": ["exclusive"]}, "launcher.sbatch_options", "one word"),
        ({"type": "kubernetes"}, "launcher.type", "slurm"),
        ({"partition": "gpu; rm -rf /"}, "launcher.partition", "SLURM name"),
    ],
)
def test_a_bad_launcher_section_names_the_field_and_the_fix(launcher, field, words):
    data = {**copy.deepcopy(STUDY), "launcher": launcher}
    with pytest.raises(SpecError) as caught:
        parse_study_spec(data, source="study.yaml")
    assert caught.value.exit_code == 2
    assert field in str(caught.value) and words in str(caught.value), str(caught.value)


def test_time_in_minutes_may_be_a_number():
    assert "--time=90" in directives(script(launcher={"time": 90}))


def test_sbatch_missing_is_one_line_naming_the_fix(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ConfigError, match=r"sbatch is not on PATH; run hpo on a SLURM login node"):
        require_sbatch()


def test_squeue_and_sacct_lines_give_each_array_tasks_state():
    text = "12_0 RUNNING\n12_1 PENDING\n12_[2-3] PENDING\n13_0 RUNNING\n12_4 CANCELLED by 0\n12.batch COMPLETED\n"
    assert _parse_task_lines(text, "12") == {0: "RUNNING", 1: "PENDING", 4: "CANCELLED"}


def test_outside_the_cluster_task_states_are_unknown_not_an_error(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert task_states("12", 2) == {0: UNKNOWN, 1: UNKNOWN}
