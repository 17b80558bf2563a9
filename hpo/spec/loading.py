"""Load run and study files: read YAML (data only), apply `--set` overrides, validate, fill the defaults that depend
on where the file is and where the command runs (names, output folders, the storage URL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from hpo.spec.errors import SpecError, problems_from_validation_error
from hpo.spec.names import check_plain_name
from hpo.spec.output_url import is_url, mirror_dir
from hpo.spec.overrides import apply_overrides, load_yaml_file
from hpo.spec.run import RunSpec
from hpo.spec.study import StudySpec

STUDY_KEYS = ("study", "search_space")


def is_study_data(data: dict[str, Any]) -> bool:
    return any(key in data for key in STUDY_KEYS)


def load_run_spec(
    path: str | Path,
    overrides: list[str] | tuple[str, ...] | None = None,
    output_dir: str | Path | None = None,
) -> RunSpec:
    """Validate a run file of `hpo train`. `output_dir` (from --output-dir) wins over the file's own."""
    file = Path(path)
    data = apply_overrides(load_yaml_file(file), overrides)
    return parse_run_spec(
        data, source=str(file), base_dir=file.parent, default_name=file.stem, output_dir=output_dir
    )


def load_study_spec(
    path: str | Path, overrides: list[str] | tuple[str, ...] | None = None, storage: str | None = None
) -> StudySpec:
    """Validate a study file of `hpo run`. `storage` (from --storage) wins over study.storage."""
    file = Path(path)
    data = apply_overrides(load_yaml_file(file), overrides)
    return parse_study_spec(
        data, source=str(file), base_dir=file.parent, default_name=file.stem, storage=storage
    )


def load_spec(
    path: str | Path, overrides: list[str] | tuple[str, ...] | None = None, storage: str | None = None
) -> RunSpec | StudySpec:
    """A run or a study file, told apart by its `study:` / `search_space:` sections."""
    file = Path(path)
    data = apply_overrides(load_yaml_file(file), overrides)
    if is_study_data(data):
        return parse_study_spec(
            data, source=str(file), base_dir=file.parent, default_name=file.stem, storage=storage
        )
    return parse_run_spec(data, source=str(file), base_dir=file.parent, default_name=file.stem)


def parse_run_spec(
    data: dict[str, Any],
    *,
    source: str = "run",
    base_dir: str | Path | None = None,
    default_name: str = "run",
    output_dir: str | Path | None = None,
) -> RunSpec:
    spec = _validate(RunSpec, data, source)
    spec.name = spec.name or _default_name(default_name, "name", "output_dir", source)
    spec.output_dir = _output_folder(output_dir or spec.output_dir or Path("runs") / spec.name)
    spec.task.with_base_dir(base_dir, source if base_dir is not None else None)
    spec._source = source
    return spec


def parse_study_spec(
    data: dict[str, Any],
    *,
    source: str = "study",
    base_dir: str | Path | None = None,
    default_name: str = "study",
    storage: str | None = None,
) -> StudySpec:
    if storage is not None and isinstance(data.get("study"), dict):
        data = {**data, "study": {**data["study"], "storage": storage}}
    spec = _validate(StudySpec, data, source)
    spec.study.name = spec.study.name or _default_name(default_name, "study.name", "study.output_dir", source)
    spec.study.output_dir = _output_folder(spec.study.output_dir or Path("runs") / spec.study.name)
    spec.study.storage = spec.storage  # fills the default SQLite URL from the output folder
    spec.task.with_base_dir(base_dir, source if base_dir is not None else None)
    spec._source = source
    return spec


def _default_name(name: str, field: str, output_field: str, source: str) -> str:
    """The file's stem names it when the file does not; a stem such as `.` (from `..yaml`) cannot name a folder."""
    try:
        return check_plain_name(name, output_field=output_field)
    except ValueError:
        message = f"not set, and the file's name gives {name!r}, which cannot name a folder; set {field}"
        raise SpecError(source, [(field, message)]) from None


def _validate(model: type[BaseModel], data: dict[str, Any], source: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise SpecError(source, problems_from_validation_error(error, model)) from error


def _output_folder(path: str | Path) -> str:
    """A local folder; an fsspec URL (s3://bucket/prefix) becomes its local mirror (hpo.spec.output_url), which
    records the URL: every process works on local paths, hpo.storage.remote moves the checkpoints."""
    return str(mirror_dir(str(path))) if is_url(str(path)) else _absolute(path)


def _absolute(path: str | Path) -> str:
    # Resolved once, against the directory the command runs in, so worker processes agree on every path.
    return str(Path(path).expanduser().absolute())
