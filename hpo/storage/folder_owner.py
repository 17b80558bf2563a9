"""Which study an output folder belongs to, so that two studies never share one (the same `trial-N/` folders, the same
experiments.db: a retry of one could resume from the other's checkpoint).

    <output_dir>/.hpo/study.json    {"study_name", "storage" (redacted), "study_uid", "created"}, written atomically
                                    before any trial runs
    the study's system attribute `hpo:study_uid`: a random id set once, when the study is first opened by this code

The uid, not the URL, says "the same study": one database reached by two URLs (a host name and its address, a copied
SQLite file) is the same study, and a study deleted and created anew under the same name and URL is another one. A
folder without a marker (new, or written before markers existed) is taken, unless it holds trial folders while the study
has no trial: those are another study's.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import BaseStorage

from hpo.errors import ConfigError
from hpo.spec import StudySpec
from hpo.storage.database import claim_lock, create_storage
from hpo.storage.study_db import open_study, storage_of, storage_url, study_id
from hpo.storage.urls import redact, sqlite_path

MARKER = Path(".hpo") / "study.json"
UID_ATTR = "hpo:study_uid"


def open_study_in_its_folder(spec: StudySpec, storage: str | None = None) -> optuna.Study:
    """`open_study`, refusing (exit 2) an output folder that holds another study's trials, before the study is
    created there; then the folder is marked as this study's."""
    url = storage_url(spec, storage)
    refuse_other_study(spec, url)
    study = open_study(spec, storage=storage)
    mark_output_dir(spec, study, url)
    return study


def refuse_other_study(spec: StudySpec, url: str) -> None:
    folder = Path(spec.output_dir)
    marker = read_marker(folder)
    stored = _stored_study(url, spec.study.name)
    if marker is None:
        if _trial_folders(folder) and (
            stored is None or not stored[0].get_all_trials(stored[1], deepcopy=False)
        ):
            _refuse(spec, url, "holds trial folders but no record of their study (.hpo/study.json)")
        return
    uid = stored[0].get_study_system_attrs(stored[1]).get(UID_ATTR) if stored is not None else None
    if uid != marker.get("study_uid"):
        _refuse(
            spec,
            url,
            f"holds the trials of another study '{marker.get('study_name')}' on {marker.get('storage')}",
        )


def _refuse(spec: StudySpec, url: str, what: str) -> None:
    folder = spec.output_dir
    raise ConfigError(
        f"study.output_dir: {folder} {what}, not of study '{spec.study.name}' on {redact(url)}; give this study "
        f"its own folder (--set study.output_dir=<new folder>), or delete {folder} to start afresh there"
    )


def _stored_study(url: str, name: str) -> tuple[BaseStorage, int] | None:
    """The storage and id of study `name` when it exists; nothing is created (not even a SQLite file)."""
    database = sqlite_path(url)
    if database is not None and not database.exists():
        return None
    storage = create_storage(url)
    try:
        return storage, storage.get_study_id_from_name(name)
    except KeyError:
        return None


def _trial_folders(folder: Path) -> list[Path]:
    return [path for path in folder.glob("trial-*") if path.is_dir()] if folder.is_dir() else []


def mark_output_dir(spec: StudySpec, study: optuna.Study, url: str) -> None:
    """Give the study its uid (once) and write the folder's marker, unless it is there already."""
    folder = Path(spec.output_dir)
    uid = study_uid(study, folder)
    if read_marker(folder) is not None:
        return
    record = {
        "study_name": spec.study.name,
        "storage": redact(url),  # never a password
        "study_uid": uid,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    write_atomically(folder / MARKER, json.dumps(record, indent=2) + "\n")


def study_uid(study: optuna.Study, lock_dir: Path) -> str:
    """The study's uid, set now when it has none; under the claim lock, so that two processes opening a new study at
    once agree on one."""
    storage, sid = storage_of(study), study_id(study)
    with claim_lock(storage, study.study_name, lock_dir):
        uid = storage.get_study_system_attrs(sid).get(UID_ATTR)
        if uid is None:
            uid = os.urandom(16).hex()
            storage.set_study_system_attr(sid, UID_ATTR, uid)
    return str(uid)


def read_marker(folder: Path) -> dict[str, Any] | None:
    try:
        record = json.loads((folder / MARKER).read_text())
        if not isinstance(record, dict):
            raise ValueError("not a JSON object")
        return record
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise ConfigError(
            f"study.output_dir: {folder / MARKER} cannot be read ({error}); delete it if {folder} holds only "
            "this study's trials"
        ) from error


def write_atomically(path: Path, text: str) -> None:
    """A reader sees the old file or the new one, never half of one: written beside it, then renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(
        "w", dir=path.parent, prefix=path.name, suffix=".tmp", delete=False
    ) as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(file.name, path)
