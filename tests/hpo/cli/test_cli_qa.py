"""What a new user meets at the command line (found by trying the product from a fresh clone): the help, a second run
of a finished study, the status table in an 80-column terminal, a task that refuses the file's parameters, YAML
syntax errors, and the export's output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial
from scheduler_support import trials
from study_task import write_study

from hpo.cli import COMMANDS, main
from hpo.cli.options import parse_gpus
from hpo.spec import load_study_spec
from hpo.storage.study_db import open_study


def _cli(args: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


@pytest.fixture(autouse=True)
def _optuna_verbosity():
    """The study commands quieten Optuna's logger (global state): put it back for the tests that follow."""
    before = optuna.logging.get_verbosity()
    yield
    optuna.logging.set_verbosity(before)


def _study_with_trials(tmp_path: Path, n_trials: int, trials: list[optuna.trial.FrozenTrial]) -> Path:
    """A study file whose study already holds `trials` (written straight into its real SQLite storage)."""
    path = write_study(tmp_path, study={"n_trials": n_trials})
    study = open_study(load_study_spec(path))
    for trial in trials:
        study.add_trial(trial)
    return path


def _trial(state: TrialState, value: float | None, **user_attrs) -> optuna.trial.FrozenTrial:
    return create_trial(
        state=state,
        value=value,
        params={"learning_rate": 0.00204722352812965},
        distributions={"learning_rate": FloatDistribution(1e-4, 0.1, log=True)},
        user_attrs=user_attrs,
    )


def _run_file(tmp_path: Path, model: dict, **training) -> Path:
    """A run file on the tests' tiny task (`hpo train` with 4 steps)."""
    study = yaml.safe_load(write_study(tmp_path).read_text())
    run = {
        "name": "qa",
        "output_dir": str(tmp_path / "run"),
        "task": study["task"],
        "model": model,
        "training": {**study["training"], "max_steps": 4, **training},
        "tracking": {"store": False},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(run))
    return path


def test_help_lists_every_command_with_an_untruncated_summary(capsys):
    code, out, _ = _cli(["--help"], capsys)
    assert code == 0
    commands = out.split("Commands:")[1].splitlines()
    listed = {line.split()[0]: line for line in commands if line.strip()}
    assert set(listed) == set(COMMANDS)
    assert not [line for line in listed.values() if line.rstrip().endswith("...")]
    assert "hpo run studies/digits_mlp.yaml" in out and "--debug" in out


def test_run_help_names_its_values(capsys):
    code, out, _ = _cli(["run", "--help"], capsys)
    assert code == 0
    assert "--n-trials N" in out and "--timeout S" in out
    assert "running the same command again" in " ".join(out.split())
    # `--dry-run` is a pre-flight check of a run, not "do nothing": the help says so and names the check-only command
    assert "then run. To check a file without running it: hpo validate FILE." in " ".join(out.split())


def test_second_run_of_a_finished_study_says_there_is_nothing_to_run(tmp_path):
    path = _study_with_trials(tmp_path, 2, [_trial(TrialState.COMPLETE, 0.5), _trial(TrialState.PRUNED, 0.4)])
    result = subprocess.run(
        [sys.executable, "-m", "hpo.cli", "run", str(path), "--no-dry-run"],  # through the scheduler
        env={**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "test: nothing to run, the study already has its 2 trials (1 complete, 1 pruned)" in result.stdout
    assert "--n-trials" in result.stdout
    assert "Using an existing study" not in result.stderr  # Optuna's INFO lines stay out of the output
    assert not (tmp_path / "out" / ".hpo" / "slots").exists()  # no worker was started for nothing


def test_asking_for_fewer_trials_than_the_study_holds_names_both_counts(tmp_path):
    path = _study_with_trials(tmp_path, 3, [_trial(TrialState.COMPLETE, v) for v in (0.5, 0.6, 0.7)])
    result = subprocess.run(
        [sys.executable, "-m", "hpo.cli", "run", str(path), "--no-dry-run", "--n-trials", "2"],
        env={**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert (
        "nothing to run, the study already has 3 trials, at least the 2 asked (3 complete)" in result.stdout
    )


def test_run_says_how_many_trials_this_run_finished(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    path = _study_with_trials(tmp_path, 2, [_trial(TrialState.COMPLETE, 0.5)])
    code, out, err = _cli(["run", str(path), "--in-process", "--no-dry-run"], capsys)
    assert code == 0, err
    assert "test: this run finished 1 trial in " in out
    assert "the study has 2 complete" in out


def test_run_lines_piped_to_a_log_are_not_cut_at_80_columns(tmp_path, capsys, monkeypatch):
    # Output piped to a file or CI log has no terminal width: rich would break each long line at 80 columns.
    monkeypatch.setenv("COLUMNS", "80")
    path = _study_with_trials(tmp_path, 2, [_trial(TrialState.COMPLETE, 0.5)])
    code, out, err = _cli(["run", str(path), "--in-process", "--no-dry-run"], capsys)
    assert code == 0, err
    best_line = next(line for line in out.splitlines() if line.startswith("best trial: #"))
    # the trial, its values and its checkpoint on one line
    assert len(best_line) > 80 and "checkpoint: " in best_line


def test_status_fits_80_columns_and_explains_failed_trials(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    interrupted = {"error": "interrupted at step 49", "requeued": True}
    path = _study_with_trials(
        tmp_path, 3, [_trial(TrialState.COMPLETE, 0.5), _trial(TrialState.FAIL, None, **interrupted)]
    )
    code, out, err = _cli(["status", str(path)], capsys)
    assert code == 0, err
    assert "learning_rate=0.00204722" in out  # whole, not cut to "learning_rate=…"
    assert "…" not in out
    words = " ".join(out.split())
    assert "trial 1 failed: interrupted at step 49 (queued again: the next `hpo run` resumes it)" in words


def test_train_with_parameters_the_task_refuses_exits_2_without_traceback(tmp_path, capsys):
    path = _run_file(tmp_path, {"hidden": "wide"})  # int("wide") fails in model_init
    code, out, err = _cli(["train", str(path)], capsys)
    assert code == 2
    assert f"{path}: model: task.model_init refused the parameters {{'hidden': 'wide'}}" in err
    assert "ValueError: invalid literal for int()" in err
    assert "Traceback" not in out + err


def test_yaml_syntax_error_names_file_and_line_not_unicode_string(tmp_path, capsys):
    path = _run_file(tmp_path, {})
    lines = path.read_text().splitlines()
    lines.insert(1, "broken: [1, 2")
    path.write_text("\n".join(lines) + "\n")
    code, _, err = _cli(["validate", str(path)], capsys)
    assert code == 2
    assert f"error: {path}: not valid YAML: line " in err
    assert "flow sequence that starts on line 2" in err
    assert "<unicode string>" not in err
    code, _, err = _cli(["train", str(path.with_name("missing.yaml"))], capsys)
    assert code == 2 and "missing.yaml: no such run file" in err


def test_bad_set_value_names_the_key_and_the_fix(tmp_path, capsys):
    path = write_study(tmp_path)
    code, _, err = _cli(["validate", str(path), "--set", "training.learning_rate=[1"], capsys)
    assert code == 2
    assert "--set training.learning_rate: not valid YAML (quote a value meant as text" in err
    assert "<unicode string>" not in err and "Traceback" not in err


def test_export_of_a_run_shows_the_comparison_not_raw_log_dicts(tmp_path, capsys, monkeypatch):
    """Also with load_best_model_at_end, as in the example run file (its evaluation arguments used to be refused)."""
    monkeypatch.setenv("COLUMNS", "200")
    path = _run_file(tmp_path, {}, load_best_model_at_end=True, metric_for_best_model="accuracy")
    code, _, err = _cli(["train", str(path)], capsys)
    assert code == 0, err
    code, out, err = _cli(["export", str(path), "--out", str(tmp_path / "export")], capsys)
    assert code == 0, err
    assert "reloaded from the export and evaluated" in out
    assert "{'eval_" not in out
    assert (tmp_path / "export" / "model.safetensors").is_file()


def test_fresh_train_refuses_a_folder_with_an_earlier_runs_checkpoints(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    path = _run_file(tmp_path, {})
    assert _cli(["train", str(path)], capsys)[0] == 0
    earlier = sorted(p.name for p in (tmp_path / "run").glob("checkpoint-*"))
    assert earlier == ["checkpoint-4"]

    code, _, err = _cli(["train", str(path), "--set", "training.max_steps=8"], capsys)
    assert code == 2
    assert f"{tmp_path / 'run'} already holds checkpoints of an earlier run (newest: checkpoint-4)" in err
    assert "--resume" in err and "--overwrite" in err and "--output-dir" in err
    assert sorted(p.name for p in (tmp_path / "run").glob("checkpoint-*")) == earlier  # nothing deleted

    code, _, err = _cli(["train", str(path), "--set", "training.max_steps=8", "--overwrite"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "run").glob("checkpoint-*")) == ["checkpoint-4", "checkpoint-8"]
    state = json.loads((tmp_path / "run" / "checkpoint-4" / "trainer_state.json").read_text())
    assert state["max_steps"] == 8  # the new run's checkpoint, not the earlier run's


def test_bad_gpus_is_refused_before_the_study_loads(tmp_path, capsys):
    path = write_study(tmp_path, study={"n_trials": 1})
    for command in ("run", "worker"):
        code, out, err = _cli([command, str(path), "--gpus", "a,b"], capsys)
        assert code == 2
        assert "'a,b': give GPU numbers separated by commas, e.g. 0,1,3" in err
        assert "study test" not in out and "joined" not in out


def test_gpus_may_name_the_uuids_cuda_visible_devices_lists():
    uuid = "GPU-8f2a1c3e-5b7d-4e9f-a1b2-c3d4e5f60718"
    assert parse_gpus(f"0, {uuid},MIG-4b1e2f3a") == [0, uuid, "MIG-4b1e2f3a"]


@pytest.mark.slow  # two subprocesses and a trial: ~18 s, like the scheduler's other interrupt tests
def test_ctrl_c_of_an_in_process_run_says_how_to_resume_and_the_rerun_resumes(tmp_path):
    from scheduler_support import kill_quietly, running_trial_with_checkpoint, slow_study, start_hpo, wait_for

    slow_study(tmp_path, delay=0.05)
    run = start_hpo(tmp_path, "run", "--n-trials", "1", "--in-process")
    try:
        wait_for(lambda: running_trial_with_checkpoint(tmp_path, 0, 4), what="trial 0 at checkpoint-4")
        run.send_signal(signal.SIGINT)
        output, _ = run.communicate(timeout=30)
    finally:
        kill_quietly(run)
    assert run.returncode == 130, output
    assert (
        "stopped: trial 0 saved " in output
        and "the next run resumes from there; continue with: hpo run" in output
    )
    assert "Traceback" not in output and "Aborted." not in output
    rerun = start_hpo(tmp_path, "run", "--n-trials", "1", "--in-process", "--set", "model.delay=0.0")
    output, _ = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, output
    retry = max(trials(tmp_path), key=lambda t: t.number)
    assert retry.state == TrialState.COMPLETE and retry.user_attrs["resumed_from_trial"] == 0


def test_a_missing_task_function_names_the_file(tmp_path, capsys):
    path = write_study(tmp_path, task={"model_init": "study_task:model_inti"})
    code, _, err = _cli(["validate", str(path)], capsys)
    assert code == 2
    assert f"error: {path}: task.model_init: module 'study_task' has no attribute 'model_inti'" in err
    assert "did you mean model_init?" in err
