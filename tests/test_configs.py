"""Every YAML file under studies/ loads and validates (torchtune's test_configs): run files and study files alike.

Each file must begin with the command that runs it, name importable task code, and build valid training arguments.
The dry evaluation of each file (which loads the real models) is in the slow suite.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hpo.spec import RunSpec, StudySpec, load_spec
from hpo.trial.dry_run import dry_run

STUDIES = Path(__file__).resolve().parents[1] / "studies"
CONFIGS = sorted(STUDIES.rglob("*.yaml"))


def test_there_are_example_configs():
    names = {path.name for path in CONFIGS}
    assert "digits_mlp_run.yaml" in names and len(names) >= 2


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(STUDIES)))
def test_config_loads_and_validates(path: Path):
    spec = load_spec(path)
    first_line = path.read_text().splitlines()[0]
    command = "hpo run" if isinstance(spec, StudySpec) else "hpo train"
    assert first_line == f"# {command} studies/{path.relative_to(STUDIES)}", (
        "the file must begin with its command"
    )
    task = spec.resolve_task()
    assert callable(task.model_init) and callable(task.data)
    args = spec.training_arguments(output_dir="unused")
    assert args.output_dir == "unused"
    if isinstance(spec, RunSpec):
        assert spec.name and spec.output_dir
    else:
        assert spec.study.n_trials or spec.study.timeout, "an example study must end by itself"


@pytest.mark.slow
@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(STUDIES)))
def test_config_dry_run_produces_its_metrics(path: Path, monkeypatch, tmp_path):
    # torch's inductor sets this process-wide the first time a model touches it (transformers does); keep it per test
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    metrics = dry_run(load_spec(path))
    assert "eval_loss" in metrics
