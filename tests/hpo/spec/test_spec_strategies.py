"""`save_strategy: no` as users of the transformers names write it: YAML reads `no` (and `off`, `false`) as false, so
every `*_strategy` field of `training:` takes false as "no", in the file and in `--set`."""

from __future__ import annotations

from pathlib import Path

from study_task import write_study

from hpo.spec import load_study_spec


def _with_training_text(tmp_path: Path, lines: str) -> Path:
    path = write_study(tmp_path)
    text = path.read_text().replace("training:\n", f"training:\n{lines}", 1)
    path.write_text(text)
    return path


def test_strategies_written_no_in_the_file_mean_no(tmp_path):
    path = _with_training_text(tmp_path, "  save_strategy: no\n  logging_strategy: off\n")
    path.write_text(path.read_text().replace("  save_strategy: steps\n", "").replace("  save_steps: 4\n", ""))
    spec = load_study_spec(path)
    args = spec.training_arguments()
    assert (args.save_strategy, args.logging_strategy) == ("no", "no")
    assert spec.training["save_strategy"] == "no"


def test_set_strategy_no_means_no(tmp_path):
    path = write_study(tmp_path)
    spec = load_study_spec(path, overrides=["training.save_strategy=no", "training.eval_strategy=false"])
    args = spec.training_arguments()
    assert (args.save_strategy, args.eval_strategy) == ("no", "no")
