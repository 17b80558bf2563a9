"""bench/peers/compare.py's own code paths, without Ray: a real (tiny) Optuna-alone run measured as the benchmark measures it,
the commands it gives each contender, and the table of ratios to hpo."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import optuna
import pytest
import yaml

from hpo.spec import load_study_spec
from hpo.trial.space import sample_params

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "peers"))

import compare as peers  # noqa: E402
import minilm_loop  # noqa: E402


def test_a_tiny_optuna_alone_run_is_measured_from_its_events_and_its_runs_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))  # where the comparison's own folder goes
    options = [
        "--contenders",
        "optuna",
        "--trials",
        "2",
        "--epochs",
        "2",
        "--repeats",
        "1",
        "--target",
        "0.5",
    ]
    code = peers.main([*options, "--no-startup", "--json", str(tmp_path / "measures.json")])
    assert code == 0, capsys.readouterr().err
    [measure] = json.loads((tmp_path / "measures.json").read_text())
    assert measure["trials"] == 2 and 0.5 < measure["best"] <= 1.0
    assert measure["to_target_s"] is not None and 0 < measure["to_target_s"] < measure["wall_s"]
    assert measure["peak_rss_mb"] > 100  # torch was loaded in the process tree it sampled
    assert 0 < measure["peak_pss_mb"] <= measure["peak_rss_mb"]
    # The runs went in a temporary folder, removed at the end (without --keep nothing is left behind).
    assert f"runs in {temporary / 'hpo-peers-'}" in capsys.readouterr().out
    assert list(temporary.iterdir()) == []


def test_the_hpo_command_is_the_shipped_study_with_only_the_folder_and_seed_set(tmp_path: Path) -> None:
    command = peers.command_for("hpo", tmp_path / "out", 30, 20, seed=2)
    assert command[-6:] == [
        "run",
        str(peers.STUDY_FILE),
        "--set",
        f"study.output_dir={tmp_path / 'out'}",
        "--set",
        "study.sampler.seed=2",
    ]
    quick = peers.command_for("hpo", tmp_path / "out", 6, 3, seed=0)
    assert "--n-trials" in quick and "study.pruner.max_resource=135" in quick


def test_summary_counts_early_stops_and_the_first_time_the_target_was_reached() -> None:
    events = [
        {"trial": "a", "time": 10.0, "epoch": 1, "accuracy": 0.90},
        {"trial": "a", "time": 12.0, "epoch": 2, "accuracy": 0.975},
        {"trial": "b", "time": 11.0, "epoch": 1, "accuracy": 0.80},  # stopped after its first epoch
        {"trial": "c", "time": 14.0, "epoch": 2, "accuracy": 0.98},
    ]
    trials, best, stopped, to_target = peers.summarize(events, started=5.0, epochs=2, target=0.97)
    assert (trials, best, stopped, to_target) == (3, 0.98, 1, 7.0)


def test_the_table_gives_each_peer_as_a_ratio_to_hpo() -> None:
    plan = peers.Plan(contenders=["hpo", "optuna"], repeats=1)
    common = {"repeat": 0, "trials": 30, "stopped_early": 20, "peak_rss_mb": 1000.0, "peak_pss_mb": 500.0}
    measures = [
        peers.Measure("hpo", kind="study", wall_s=40.0, best=0.98, to_target_s=10.0, **common),
        peers.Measure("optuna", kind="study", wall_s=44.0, best=0.98, to_target_s=20.0, **common),
        peers.Measure("hpo", kind="startup", wall_s=4.0, best=0.8, to_target_s=None, **common),
        peers.Measure("optuna", kind="startup", wall_s=2.0, best=0.8, to_target_s=None, **common),
    ]
    text = peers.table(measures, plan)
    optuna_row = next(line for line in text.splitlines() if line.startswith("| optuna"))
    assert "44.0 (1.10x)" in optuna_row and "20.0 (2.00x)" in optuna_row and "2.0 (0.50x)" in optuna_row


def test_an_unknown_contender_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        peers.main(["--contenders", "hpo,katib"])
    assert raised.value.code == 2
    assert "--contenders: unknown katib" in capsys.readouterr().err


@pytest.mark.slow  # 16 s on 2 cores: run by .ci/run's slow suite
def test_a_tiny_minilm_lora_optuna_alone_run_is_measured_from_its_events(tmp_path: Path) -> None:
    # One real LoRA trial on the pretrained MiniLM, two evaluations (8 steps), in one process on SQLite (a second
    # process would load MiniLM again for nothing: the test stays well under 30 s on a busy machine).
    lora = peers.PROBLEMS["minilm-lora"]
    plan = peers.Plan(
        trials=1, epochs=8, repeats=1, target=0.0, contenders=["optuna"], root=tmp_path, problem=lora
    )
    measure = peers.run_one("optuna", 0, "study", plan)
    assert measure.exit_code == 0, measure.error
    events = peers.evaluations("optuna", tmp_path / "optuna-study-0")
    assert [(e["trial"], e["step"]) for e in events] == [("0", 4), ("0", 8)]
    assert measure.trials == 1 and measure.stopped_early == 0  # it reached step 8, the whole budget
    assert 0.0 <= measure.best <= 1.0 and measure.best == max(e["accuracy"] for e in events)
    assert measure.to_target_s is not None and 0 < measure.to_target_s < measure.wall_s
    assert measure.peak_rss_mb > 300  # torch, transformers and the 22M-parameter MiniLM in the process tree
    stopped = peers.summarize(events[:1], started=0.0, epochs=8, target=1.1, unit="step")
    assert stopped[2] == 1 and stopped[3] is None  # counted in steps: ended at step 4 of 8; 1.1 never reached


def test_the_minilm_lora_peers_mirror_the_study_file() -> None:
    study = yaml.safe_load(peers.PROBLEMS["minilm-lora"].study_file.read_text())
    assert minilm_loop.ENQUEUED == study["study"]["enqueue"][0]
    assert minilm_loop.DATA_PARAMS == study["model"]
    assert minilm_loop.N_STARTUP_TRIALS == study["study"]["sampler"]["n_startup_trials"]
    assert study["study"]["pruner"] == {
        "type": "median",
        "n_startup_trials": minilm_loop.PRUNER_STARTUP_TRIALS,
    }
    assert (minilm_loop.BATCH, minilm_loop.EVAL_BATCH) == (
        study["training"]["per_device_train_batch_size"],
        study["training"]["per_device_eval_batch_size"],
    )
    # The same distributions, in the same order, as hpo samples from the file's search_space.
    ours, hpos = optuna.create_study().ask(), optuna.create_study().ask()
    minilm_loop.sample(ours)
    sample_params(hpos, load_study_spec(peers.PROBLEMS["minilm-lora"].study_file).search_space)
    assert list(ours.distributions.items()) == list(hpos.distributions.items())


def test_the_hpo_minilm_lora_command_sets_only_the_folder_seed_budget_and_threads(tmp_path: Path) -> None:
    command = peers.command_for("hpo", tmp_path / "out", 6, 36, seed=1, problem="minilm-lora")
    assert command[command.index("run") + 1] == str(peers.ROOT / "studies" / "minilm_lora.yaml")
    settings = [command[i + 1] for i, word in enumerate(command) if word == "--set"]
    assert settings == [
        f"study.output_dir={tmp_path / 'out'}",
        "study.sampler.seed=1",
        "resources.threads_per_trial=1",
        "training.max_steps=36",
        "training.eval_steps=4",
        "training.logging_steps=4",
        "training.warmup_ratio=0.05",
    ]
    assert "--n-trials" not in command  # the study file's 6
    peer = peers.command_for("ray", tmp_path / "ray", 6, 36, seed=1, problem="minilm-lora")
    assert peer[-6:] == ["--problem", "minilm-lora", "--steps", "36", "--seed", "1"]


def test_an_unknown_problem_is_a_one_line_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        peers.main(["--problem", "cifar"])
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert err.strip() == "--problem: unknown 'cifar'; choose from digits, minilm-lora"
