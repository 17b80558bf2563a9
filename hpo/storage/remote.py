"""Checkpoints in an object store: the study's output folder given as an fsspec URL (`s3://bucket/prefix`).

Every process trains into its local mirror (hpo.spec.output_url) and this module keeps the object store in step:

    upload(checkpoint)      after the Trainer renamed `checkpoint-<step>/` into place: every file under
                            `<url>/trial-N/checkpoint-<step>/`, then the marker `<url>/trial-N/checkpoint-<step>.complete`
                            (a manifest: a random id and each file's size), written last. A reader goes by markers only,
                            so it never sees a half-uploaded checkpoint; a killed upload leaves files without a marker,
                            which no resume picks and retention deletes.
    fetch(path)             a checkpoint any machine recorded (its path names that machine's mirror): downloaded into
                            this mirror beside it, checked against the manifest, renamed into place. A local copy whose
                            marker matches the remote one is used as it is (a PBT exploit rewrites a checkpoint: new id).
    latest(run_dir)         the newest checkpoint with a marker: where a retry resumes.
    remove(checkpoint)      the marker first (readers stop seeing it), then the files; the local copy too.

An object store that stops answering (a refused or dropped connection, a timeout) is waited for, as the database is
(hpo.storage.outage, its own clock): an upload is done again whole, its marker last, so a checkpoint is marked saved
only once every file is in the store; reads and fetches are tried again; past `storage.outage_timeout` the call raises
StorageUnreachable. For a plain local output folder every function does what the local code did (or nothing). Credentials and the endpoint
come from the environment as s3fs and botocore read them (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL or
FSSPEC_S3_ENDPOINT_URL, AWS_PROFILE); nothing here prints them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from hpo.errors import StorageUnreachable
from hpo.spec.output_url import MIRROR_PREFIX, remote_url
from hpo.storage import outage
from trainer.checkpoint_names import STATE_FILE, is_complete, latest_checkpoint

logger = logging.getLogger(__name__)
T = TypeVar("T")
MARKER_SUFFIX = ".complete"
_CHECKPOINT = "checkpoint-"


@dataclass
class Transfer:
    """What one upload or fetch moved: for the trial's record and the figures."""

    files: int = 0
    bytes: int = 0
    seconds: float = 0.0


@dataclass
class ObjectStore:
    """The object store behind one mirror folder."""

    url: str
    mirror: Path
    options: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def _fs_and_root(self) -> tuple[Any, str]:
        import fsspec  # only when a URL output folder is used: s3fs and botocore take a while to import

        fs, root = fsspec.core.url_to_fs(self.url, **self.options)
        return fs, root.rstrip("/")

    @property
    def fs(self) -> Any:
        return self._fs_and_root[0]

    def key(self, local: Path) -> str:
        """The object key of a path under the mirror."""
        relative = local.relative_to(self.mirror).as_posix()
        root = self._fs_and_root[1]
        return root if relative == "." else f"{root}/{relative}"

    def _is_local_fs(self) -> bool:
        return bool(_protocols(self.fs) & {"file", "local"})

    def _fresh(self, key: str) -> None:
        # s3fs caches listings per process; another machine may have written since.
        self.fs.invalidate_cache(key)

    def manifest(self, checkpoint: Path) -> str | None:
        """The marker's text, or None when the checkpoint is not (completely) in the store."""
        key = self.key(checkpoint) + MARKER_SUFFIX
        return _ride(lambda: self._cat(key), "read a checkpoint's marker")

    def _cat(self, key: str) -> str | None:
        self._fresh(key)
        try:
            return self.fs.cat_file(key).decode()
        except FileNotFoundError:
            return None

    def complete(self, checkpoint: Path) -> bool:
        """Whether the checkpoint's marker is in the store (from the snapshot of `listing()` when one is taken)."""
        if self.mirror in _snapshots and checkpoint.parent.parent == self.mirror:
            return checkpoint.name in self.names(checkpoint.parent)[0]
        return self.manifest(checkpoint) is not None

    def names(self, run_dir: Path) -> tuple[set[str], set[str]]:
        """(checkpoints with a marker, checkpoint folders) under a trial's folder in the store."""
        snapshot = _snapshots.get(self.mirror)
        if snapshot is not None and run_dir.parent == self.mirror:
            marked, folders = snapshot.get(run_dir.name, (set(), set()))
            return set(marked), set(folders)
        key = self.key(run_dir)
        entries = _ride(lambda: self._ls(key), "list a trial's checkpoints")
        base = [str(entry).rstrip("/").rsplit("/", 1)[-1] for entry in entries]
        marked = {
            n[: -len(MARKER_SUFFIX)] for n in base if n.startswith(_CHECKPOINT) and n.endswith(MARKER_SUFFIX)
        }
        folders = {n for n in base if n.startswith(_CHECKPOINT) and not n.endswith(MARKER_SUFFIX)}
        return marked, folders

    def _ls(self, key: str) -> list[Any]:
        self._fresh(key)
        try:
            return list(self.fs.ls(key, detail=False))
        except FileNotFoundError:
            return []


def unreachable(error: BaseException) -> bool:
    """Whether the object store did not answer: a refused, dropped or timed-out connection anywhere in the cause chain
    (botocore's ConnectionError family, aiohttp's, or Python's own). Looked up by name: botocore loads only with s3fs."""
    seen: BaseException | None = error
    for _ in range(10):  # a cause chain is short; a cycle in one must not loop for ever
        if seen is None:
            return False
        if isinstance(seen, StorageUnreachable | ConnectionError | TimeoutError):
            return True
        names = {(kind.__module__.split(".")[0], kind.__name__) for kind in type(seen).__mro__}
        if ("botocore", "ConnectionError") in names or ("aiohttp", "ClientConnectionError") in names:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _ride(call: Callable[[], T], what: str) -> T:
    return outage.ride(call, what, unreachable=unreachable, on=outage.store_clock)


# mirror -> trial folder name -> (checkpoints with a marker, checkpoint folders): one listing of the whole store while
# retention reads every trial's folder (one request per page of 1,000 objects, not a few per trial).
_snapshots: dict[Path, dict[str, tuple[set[str], set[str]]]] = {}


@contextlib.contextmanager
def listing(output_dir: str | Path) -> Iterator[None]:
    """Within: what the store holds is read from one listing taken on entry (deletes still go to the store)."""
    store = store_of(output_dir)
    if store is None or store.mirror in _snapshots:
        yield
        return
    root = store.key(store.mirror)

    def find() -> list[str]:
        store._fresh(root)
        return list(store.fs.find(root))

    snapshot: dict[str, tuple[set[str], set[str]]] = {}
    for path in _ride(
        find, "list the study's checkpoints"
    ):  # retention waits out an outage too (chaos seed 687277)
        parts = str(path)[len(root) :].strip("/").split("/")
        if len(parts) < 2 or not parts[0].startswith("trial-") or not parts[1].startswith(_CHECKPOINT):
            continue
        marked, folders = snapshot.setdefault(parts[0], (set(), set()))
        if len(parts) == 2 and parts[1].endswith(MARKER_SUFFIX):
            marked.add(parts[1][: -len(MARKER_SUFFIX)])
        elif len(parts) > 2:
            folders.add(parts[1])
    _snapshots[store.mirror] = snapshot
    try:
        yield
    finally:
        _snapshots.pop(store.mirror, None)


def _protocols(fs: Any) -> set[str]:
    protocol = fs.protocol
    return set(protocol) if isinstance(protocol, (tuple, list)) else {protocol}


def store_of(output_dir: str | Path) -> ObjectStore | None:
    """The object store behind `output_dir`, or None when it is a plain local folder."""
    url = remote_url(output_dir)
    return ObjectStore(url, Path(output_dir).absolute()) if url else None


def localize(path: str | Path, output_dir: str | Path) -> Path:
    """A path another machine recorded, in this machine's mirror: the part after its `hpo-mirror-<hash>` folder, under
    this one. A path of a plain local study, or outside any mirror, is returned as it is."""
    path, mirror = Path(path), Path(output_dir).absolute()
    if not mirror.name.startswith(MIRROR_PREFIX) or mirror.name not in path.parts:
        return path
    index = len(path.parts) - 1 - path.parts[::-1].index(mirror.name)
    return mirror.joinpath(*path.parts[index + 1 :])


def _marker(local: Path) -> Path:
    return local.with_name(local.name + MARKER_SUFFIX)


# ---- writing -------------------------------------------------------------------------------------------------------
def upload(checkpoint: str | Path, output_dir: str | Path) -> Transfer | None:
    """Put a complete local checkpoint in the store, its marker last. None for a local study."""
    store = store_of(output_dir)
    if store is None:
        return None
    local = Path(checkpoint).absolute()
    if not is_complete(local):
        raise FileNotFoundError(f"{local} is not a complete checkpoint (no {STATE_FILE})")
    started = time.perf_counter()
    manifest = _ride(lambda: _put(store, local), "upload a checkpoint")
    _marker(local).write_text(manifest)  # the local copy is the one the store now holds
    sizes = json.loads(manifest)["files"]
    done = Transfer(len(sizes), sum(sizes.values()), time.perf_counter() - started)
    logger.info(
        "uploaded %s: %d files, %d bytes in %.2f s", store.key(local), done.files, done.bytes, done.seconds
    )
    return done


def _put(store: ObjectStore, local: Path) -> str:
    """Every file of the checkpoint, then its marker (a manifest); the manifest. Done again whole after an outage."""
    fs, key = store.fs, store.key(local)
    if store.manifest(local) is not None:
        fs.rm_file(
            key + MARKER_SUFFIX
        )  # rewritten in place (a PBT exploit): not complete while its files change
    files = sorted(p for p in local.rglob("*") if p.is_file())
    sizes = {p.relative_to(local).as_posix(): p.stat().st_size for p in files}
    for path in files:
        target = f"{key}/{path.relative_to(local).as_posix()}"
        if store._is_local_fs():
            fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
        fs.put_file(str(path), target)
    manifest = json.dumps({"id": uuid.uuid4().hex, "files": sizes}, sort_keys=True)
    fs.pipe_file(key + MARKER_SUFFIX, manifest.encode())
    return manifest


def remove(checkpoint: str | Path, output_dir: str | Path) -> None:
    """Delete a checkpoint here and in the store: the store's marker first, so no reader picks it meanwhile."""
    local = localize(checkpoint, output_dir)
    store = store_of(output_dir)
    if store is not None:
        fs, key = store.fs, store.key(local)
        for target, recursive in ((key + MARKER_SUFFIX, False), (key, True)):
            try:
                fs.rm(target, recursive=recursive)
            except FileNotFoundError:
                pass
        _marker(local).unlink(missing_ok=True)
    shutil.rmtree(local, ignore_errors=True)


# ---- reading -------------------------------------------------------------------------------------------------------
def fetch(path: str | Path | None, output_dir: str | Path) -> tuple[Path | None, Transfer | None]:
    """A recorded checkpoint as a local folder: (path, what was downloaded). For a local study the path if it is a
    folder. (None, None) when the store holds no complete copy."""
    if not path:
        return None, None
    store = store_of(output_dir)
    if store is None:
        return (Path(path), None) if Path(path).is_dir() else (None, None)
    local = localize(path, output_dir)
    if not local.is_relative_to(store.mirror):
        return (local, None) if local.is_dir() else (None, None)
    manifest = store.manifest(local)
    if manifest is None:
        return None, None
    marker = _marker(local)
    if local.is_dir() and marker.is_file() and marker.read_text() == manifest:
        return local, Transfer()
    return local, _ride(lambda: _download(store, local, manifest), "fetch a checkpoint")


def _download(store: ObjectStore, local: Path, manifest: str) -> Transfer:
    started = time.perf_counter()
    sizes: dict[str, int] = json.loads(manifest)["files"]
    temporary = local.with_name(f".{local.name}.fetch-{uuid.uuid4().hex[:8]}.tmp")
    key = store.key(local)
    try:
        for name, size in sizes.items():
            target = temporary / name
            target.parent.mkdir(parents=True, exist_ok=True)
            store.fs.get_file(f"{key}/{name}", str(target))
            if target.stat().st_size != size:
                raise OSError(f"{key}/{name}: {target.stat().st_size} bytes, the marker says {size}")
        shutil.rmtree(local, ignore_errors=True)
        _marker(local).unlink(missing_ok=True)
        temporary.rename(local)
        _marker(local).write_text(manifest)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    done = Transfer(len(sizes), sum(sizes.values()), time.perf_counter() - started)
    logger.info("fetched %s: %d files, %d bytes in %.2f s", key, done.files, done.bytes, done.seconds)
    return done


def exists(path: str | Path, output_dir: str | Path) -> bool:
    """Whether a recorded checkpoint can be had: a complete copy in the store, or (local study) a folder here."""
    store = store_of(output_dir)
    if store is None:
        return Path(path).is_dir()
    local = localize(path, output_dir)
    if not local.is_relative_to(store.mirror):
        return local.is_dir()
    return store.complete(local)


def latest(run_dir: str | Path, output_dir: str | Path) -> Path | None:
    """The newest checkpoint of a trial folder a resume may use: with a store, the newest with a marker there (a
    local one whose upload was killed is not one); else the Trainer's newest complete one."""
    store = store_of(output_dir)
    run_dir = localize(run_dir, output_dir)
    if store is None or not run_dir.is_relative_to(store.mirror):
        return latest_checkpoint(run_dir) if run_dir.is_dir() else None
    marked, _ = store.names(run_dir)
    steps = sorted(int(n[len(_CHECKPOINT) :]) for n in marked if n[len(_CHECKPOINT) :].isdigit())
    return run_dir / f"{_CHECKPOINT}{steps[-1]}" if steps else None


def checkpoints(run_dir: str | Path, output_dir: str | Path) -> list[Path]:
    """Every checkpoint of a trial folder, here or in the store, marked or not (what retention may delete), as paths
    in this mirror."""
    run_dir = localize(run_dir, output_dir)
    found: set[Path] = set()
    if run_dir.is_dir():
        found |= {p for p in run_dir.iterdir() if p.is_dir() and p.name.lstrip(".").startswith(_CHECKPOINT)}
    store = store_of(output_dir)
    if store is not None and run_dir.is_relative_to(store.mirror):
        marked, folders = store.names(run_dir)
        found |= {run_dir / name for name in marked | folders}
    return sorted(found)


# ---- before any work starts ----------------------------------------------------------------------------------------
def check_store(output_dir: str | Path, setting: str) -> None:
    """Refuse (ConfigError: one line, exit 2) an object store this machine cannot use: s3fs missing, no answer from
    the endpoint, a missing bucket, no credentials. `setting` names what the user set (study.output_dir, --out)."""
    url = remote_url(output_dir)
    if url is not None:
        check_url(url, setting, known=used_here(output_dir))


def used_here(mirror: str | Path) -> bool:
    """Whether a run on this machine has worked in this mirror, so the store answered it before: a study's marker
    (hpo.storage.folder_owner's .hpo/study.json, written once the store was checked), a trial folder, or a checkpoint
    of `hpo train`. Logs alone do not count: they are opened before the check."""
    mirror = Path(mirror)
    return (mirror / ".hpo" / "study.json").is_file() or any(
        path.name.startswith(("trial-", _CHECKPOINT)) for path in mirror.iterdir()
    )


def check_url(url: str, setting: str, known: bool = False) -> None:
    """`known`: the store answered this machine before, so no answer now is an outage (a restart, a failover), waited
    for as the database's is, up to storage.outage_timeout (found by tests/chaos: `hpo run` started again during a
    4-minute outage refused at once, and a user or a job array restarting it gave up). A store never reached is
    refused at once: a mistyped endpoint fails in seconds."""
    from hpo.errors import ConfigError

    try:
        import fsspec

        fs, root = fsspec.core.url_to_fs(url, **_quick_options(url))
    except ImportError as error:
        raise ConfigError(
            f"{setting}: {url} needs {error.name or 's3fs'}, which is not installed; "
            "install the s3 extra: pip install -c constraints.txt 'hpo[s3]'"
        ) from None
    if _protocols(fs) & {"file", "local"}:
        try:
            fs.makedirs(root, exist_ok=True)
        except OSError as error:
            raise ConfigError(
                f"{setting}: cannot create {root} ({error.strerror}); name a writable folder"
            ) from None
        return
    bucket = root.split("/", 1)[0]
    where = _endpoint(fs)
    try:
        if known:
            _ride(lambda: fs.ls(bucket, detail=False), f"list bucket '{bucket}'")
        else:
            fs.ls(bucket, detail=False)
    except FileNotFoundError:
        raise ConfigError(
            f"{setting}: bucket '{bucket}' does not exist at {where}; create it (e.g. aws s3 mb s3://{bucket}) "
            "or name an existing one"
        ) from None
    except PermissionError:
        raise ConfigError(
            f"{setting}: {where} refused to list bucket '{bucket}'; give credentials that may read and write it "
            "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)"
        ) from None
    except Exception as error:  # noqa: BLE001 - botocore's connection and credential errors share no base with OSError
        name = type(error).__name__
        if "Credentials" in name:
            fix = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)"
            raise ConfigError(f"{setting}: no credentials for {where} ({name}); {fix}") from None
        fix = "start it, or set AWS_ENDPOINT_URL (or FSSPEC_S3_ENDPOINT_URL) to its address"
        raise ConfigError(f"{setting}: the object store at {where} does not answer ({name}); {fix}") from None


def _quick_options(url: str) -> dict[str, Any]:
    """A check that fails in seconds, not after botocore's minute of retries; a fresh client (no cached one)."""
    if not url.startswith(("s3://", "s3a://")):
        return {}
    return {
        "skip_instance_cache": True,
        "config_kwargs": {"connect_timeout": 5, "read_timeout": 10, "retries": {"max_attempts": 1}},
    }


def _endpoint(fs: Any) -> str:
    """Where the store is, for a message: the endpoint's scheme, host and port (never a key or a secret)."""
    from urllib.parse import urlsplit

    endpoint = getattr(fs, "endpoint_url", None) or (getattr(fs, "client_kwargs", None) or {}).get(
        "endpoint_url"
    )
    if not endpoint:
        import os

        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if not endpoint:
        protocol = fs.protocol[0] if isinstance(fs.protocol, (tuple, list)) else fs.protocol
        return "AWS S3 (no endpoint set)" if protocol in ("s3", "s3a") else f"{protocol}://"
    parts = urlsplit(str(endpoint))
    return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")


# ---- an export -----------------------------------------------------------------------------------------------------
def upload_folder(local: str | Path, url: str, last: str = "export.json") -> Transfer:
    """Every file of `local` under `url`, the file named `last` (the export's manifest) after all the others: a reader
    that finds it finds the whole export."""
    import fsspec

    started = time.perf_counter()
    fs, root = fsspec.core.url_to_fs(url)
    root = root.rstrip("/")
    local = Path(local)
    files = sorted((p for p in local.rglob("*") if p.is_file()), key=lambda p: (p.name == last, str(p)))
    local_fs = bool(_protocols(fs) & {"file", "local"})
    for path in files:
        target = f"{root}/{path.relative_to(local).as_posix()}"
        if local_fs:
            fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
        fs.put_file(str(path), target)
    return Transfer(len(files), sum(p.stat().st_size for p in files), time.perf_counter() - started)


def shown(path: str | Path, output_dir: str | Path) -> str | None:
    """A recorded checkpoint as a user can find it: its URL in the object store (a URL output folder) or its local
    path; None when it is no longer kept."""
    store = store_of(output_dir)
    if store is None:
        return str(path) if Path(path).is_dir() else None
    local = localize(path, output_dir)
    if not local.is_relative_to(store.mirror) or store.manifest(local) is None:
        return str(local) if local.is_dir() else None
    return f"{store.url}/{local.relative_to(store.mirror).as_posix()}"
