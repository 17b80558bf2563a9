"""hpo.storage.remote on a `file://` object store (fsspec's local file system; the s3 suite runs the same code on a
real S3 API): a reader never sees a checkpoint without its marker, a killed upload leaves nothing a resume would pick,
fetches are checked and atomic, paths recorded on another machine are read as this one's."""

from __future__ import annotations

import json
import os
from pathlib import Path

import fsspec
import pytest

from hpo.errors import ConfigError
from hpo.spec.output_url import is_url, mirror_dir, remote_url
from hpo.storage import remote
from hpo.storage.retention import checkpoints_in
from trainer.checkpoint import STATE_FILE


@pytest.fixture
def machines(tmp_path, monkeypatch):
    """Two machines' mirrors of one `file://` store: (url, mirror of machine A, mirror of machine B)."""
    url = f"file://{tmp_path / 'bucket' / 'study'}"
    monkeypatch.setenv("HPO_SCRATCH", str(tmp_path / "a"))
    a = mirror_dir(url)
    monkeypatch.setenv("HPO_SCRATCH", str(tmp_path / "b"))
    b = mirror_dir(url)
    return url, a, b


def _checkpoint(mirror: Path, trial: int, step: int, payload: bytes = b"w" * 1000) -> Path:
    folder = mirror / f"trial-{trial}" / f"checkpoint-{step}"
    (folder / "sub").mkdir(parents=True, exist_ok=True)
    (folder / "model.safetensors").write_bytes(payload)
    (folder / "sub" / "rng.pt").write_bytes(b"r" * 10)
    (folder / STATE_FILE).write_text(json.dumps({"global_step": step}))
    return folder


def test_urls_map_to_one_mirror_name_on_every_machine(machines):
    url, a, b = machines
    assert is_url(url) and is_url("s3://bucket/prefix") and not is_url("/runs/x") and not is_url("c:/runs")
    assert a != b and a.name == b.name and remote_url(a) == remote_url(b) == url
    recorded_on_a = a / "trial-3" / "checkpoint-8"
    assert remote.localize(recorded_on_a, b) == b / "trial-3" / "checkpoint-8"
    assert remote.localize("/elsewhere/trial-3/checkpoint-8", b) == Path("/elsewhere/trial-3/checkpoint-8")


def test_an_uploaded_checkpoint_is_fetched_on_another_machine_bit_for_bit(machines):
    _, a, b = machines
    written = _checkpoint(a, 0, 4)
    sent = remote.upload(written, a)
    assert (
        sent is not None
        and sent.files == 3
        and sent.bytes == sum(p.stat().st_size for p in written.rglob("*") if p.is_file())
    )
    assert remote.latest(b / "trial-0", b) == b / "trial-0" / "checkpoint-4"
    got, fetched = remote.fetch(written, b)  # the path machine A recorded
    assert got == b / "trial-0" / "checkpoint-4" and fetched is not None and fetched.bytes == sent.bytes
    assert (got / "model.safetensors").read_bytes() == (written / "model.safetensors").read_bytes()
    assert (got / "sub" / "rng.pt").is_file()
    again, second = remote.fetch(written, b)
    assert again == got and second is not None and second.bytes == 0  # the current copy is used as it is


def test_a_reader_never_sees_a_checkpoint_before_its_marker(machines, monkeypatch):
    _, a, b = machines
    seen_during_upload = []
    put_file = fsspec.filesystem("file").put_file

    def watching_put(self, source, target, *args, **kwargs):
        # Machine B looks while A is still uploading (after the first file, and after each one).
        put_file(source, target, *args, **kwargs)
        seen_during_upload.append(
            (remote.latest(b / "trial-0", b), remote.exists(a / "trial-0" / "checkpoint-4", b))
        )

    monkeypatch.setattr(type(fsspec.filesystem("file")), "put_file", watching_put)
    remote.upload(_checkpoint(a, 0, 4), a)
    assert seen_during_upload and all(seen == (None, False) for seen in seen_during_upload)
    assert remote.latest(b / "trial-0", b) is not None  # the marker, written last, makes it visible


def test_a_killed_upload_leaves_nothing_a_resume_would_pick_and_retention_deletes_it(machines, monkeypatch):
    url, a, b = machines
    remote.upload(_checkpoint(a, 0, 4), a)
    fs_type = type(fsspec.filesystem("file"))

    def killed(self, *args, **kwargs):
        raise KeyboardInterrupt  # the process dies between the files and the marker

    monkeypatch.setattr(fs_type, "pipe_file", killed)
    with pytest.raises(KeyboardInterrupt):
        remote.upload(_checkpoint(a, 0, 8), a)
    monkeypatch.undo()
    store = fsspec.core.url_to_fs(url)[1]
    assert Path(store, "trial-0", "checkpoint-8", "model.safetensors").is_file()  # its files are there...
    assert (
        remote.latest(b / "trial-0", b) == b / "trial-0" / "checkpoint-4"
    )  # ...but the resume point is step 4
    assert (
        remote.latest(a / "trial-0", a) == a / "trial-0" / "checkpoint-4"
    )  # even where the local copy is complete
    assert remote.fetch(a / "trial-0" / "checkpoint-8", b) == (None, None)
    assert b / "trial-0" / "checkpoint-8" in checkpoints_in(b / "trial-0", b)  # retention sees it
    remote.remove(b / "trial-0" / "checkpoint-8", b)
    assert not Path(store, "trial-0", "checkpoint-8").exists()
    assert remote.latest(b / "trial-0", b) == b / "trial-0" / "checkpoint-4"


def test_remove_deletes_the_marker_the_files_and_the_local_copy_and_no_neighbour(machines):
    url, a, _ = machines
    remote.upload(_checkpoint(a, 0, 4), a)
    remote.upload(_checkpoint(a, 0, 40), a)
    remote.remove(a / "trial-0" / "checkpoint-4", a)
    store = Path(fsspec.core.url_to_fs(url)[1])
    assert not (store / "trial-0" / "checkpoint-4").exists()
    assert not (store / "trial-0" / "checkpoint-4.complete").exists()
    assert not (a / "trial-0" / "checkpoint-4").exists()
    assert (store / "trial-0" / "checkpoint-40" / "model.safetensors").is_file()  # a prefix, not a neighbour
    assert remote.latest(a / "trial-0", a) == a / "trial-0" / "checkpoint-40"


def test_a_rewritten_checkpoint_replaces_a_stale_local_copy(machines):
    """PBT's exploit rewrites a member's checkpoint in place: a machine holding the old copy fetches the new one."""
    _, a, b = machines
    remote.upload(_checkpoint(a, 1, 4, b"old" * 10), a)
    remote.fetch(a / "trial-1" / "checkpoint-4", b)
    remote.upload(_checkpoint(a, 1, 4, b"new" * 10), a)
    got, fetched = remote.fetch(a / "trial-1" / "checkpoint-4", b)
    assert fetched is not None and fetched.bytes > 0
    assert (got / "model.safetensors").read_bytes() == b"new" * 10


def test_a_fetch_that_does_not_match_the_manifest_leaves_no_checkpoint(machines):
    url, a, b = machines
    remote.upload(_checkpoint(a, 0, 4), a)
    store = Path(fsspec.core.url_to_fs(url)[1])
    (store / "trial-0" / "checkpoint-4" / "model.safetensors").write_bytes(b"cut short")
    with pytest.raises(OSError, match="the marker says"):
        remote.fetch(a / "trial-0" / "checkpoint-4", b)
    assert not (b / "trial-0" / "checkpoint-4").exists()
    assert not [p for p in (b / "trial-0").iterdir() if p.name.endswith(".tmp")]


def test_a_plain_local_folder_is_left_to_the_local_code(tmp_path):
    local = tmp_path / "out"
    folder = _checkpoint(local, 0, 4)
    assert remote.store_of(local) is None and remote.upload(folder, local) is None
    assert remote.fetch(folder, local) == (folder, None)
    assert remote.latest(local / "trial-0", local) == folder
    remote.remove(folder, local)
    assert not folder.exists()


def test_an_unwritable_file_store_is_refused_in_one_line(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    with pytest.raises(ConfigError) as refused:
        remote.check_url(f"file://{blocked}/study", "study.output_dir")
    message = str(refused.value)
    assert message.startswith("study.output_dir: cannot create") and "\n" not in message
    remote.check_url(f"file://{tmp_path}/fine/study", "study.output_dir")
    assert (tmp_path / "fine" / "study").is_dir()
    assert os.environ.get("AWS_SECRET_ACCESS_KEY", "") not in message or not os.environ.get(
        "AWS_SECRET_ACCESS_KEY"
    )


def test_one_listing_answers_as_the_requests_do(machines, monkeypatch):
    """Retention lists the store once (`remote.listing`): the same answers as a request per question."""
    _, a, b = machines
    remote.upload(_checkpoint(a, 0, 4), a)
    remote.upload(_checkpoint(a, 0, 8), a)
    remote.upload(_checkpoint(a, 1, 4), a)
    monkeypatch.setattr(type(fsspec.filesystem("file")), "pipe_file", lambda *a, **k: None)  # a killed upload
    remote.upload(_checkpoint(a, 0, 12), a)
    monkeypatch.undo()

    def answers():
        return [
            remote.latest(b / "trial-0", b),
            remote.latest(b / "trial-2", b),
            remote.checkpoints(b / "trial-0", b),
            [remote.exists(a / "trial-0" / f"checkpoint-{step}", b) for step in (4, 8, 12)],
        ]

    asked = answers()
    with remote.listing(b):
        assert answers() == asked
    assert asked[0] == b / "trial-0" / "checkpoint-8" and asked[3] == [True, True, False]
