"""An object store (`study.output_dir: s3://...`) that stops answering under an upload: the upload waits and is done
again whole once the store answers, and the checkpoint is marked saved (its marker, here and in the store) only then.

The test runs its own moto server (the suite's is shared by the other s3 tests), stops it, and starts a new one on the
same port a few seconds later; moto keeps objects in memory, so the new server's bucket is made again, empty: what
the store holds afterwards was uploaded after the outage."""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.request

import pytest
import s3fs

from hpo.errors import ConfigError
from hpo.spec.output_url import mirror_dir
from hpo.storage import outage, remote
from trainer.checkpoint import STATE_FILE

pytestmark = pytest.mark.s3
OUTAGE_S = (
    14  # longer than s3fs's own retries of a refused connection (about 9 s): the upload itself must wait
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_moto(port: int, bucket: str) -> subprocess.Popen:
    server = shutil.which("moto_server")
    if server is None:  # the dev extra installs it: in CI a missing one is a broken install, not a skip
        message = "moto_server is not installed (the dev extra)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    process = subprocess.Popen(
        [server, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    s3fs.S3FileSystem(skip_instance_cache=True).mkdir(bucket)
    return process


@pytest.fixture
def store(tmp_path, monkeypatch):
    """(port, bucket, mirror) of a study output folder in a moto server of this test's own."""
    port, bucket = free_port(), "outage"
    for name, value in {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "hpo-test",
        "AWS_SECRET_ACCESS_KEY": "hpo-test-secret",
        "AWS_DEFAULT_REGION": "us-east-1",
        "HPO_SCRATCH": str(tmp_path / "scratch"),
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(outage, "store_clock", outage.OutageClock(service="object store"))
    server = start_moto(port, bucket)
    yield port, bucket, mirror_dir(f"s3://{bucket}/study"), server
    server.kill()


def test_an_upload_waits_for_the_store_and_marks_the_checkpoint_saved_only_once_stored(store, caplog):
    caplog.set_level(logging.WARNING, logger="hpo.storage.outage")
    port, bucket, mirror, server = store
    checkpoint = mirror / "trial-0" / "checkpoint-4"
    checkpoint.mkdir(parents=True)
    (checkpoint / "model.safetensors").write_bytes(b"w" * 100_000)
    (checkpoint / STATE_FILE).write_text(json.dumps({"global_step": 4}))
    server.kill()
    server.wait()
    seen: dict[str, object] = {}
    restarted: list[subprocess.Popen] = []

    def back_later() -> None:
        time.sleep(OUTAGE_S)
        seen["marked during the outage"] = (mirror / "trial-0" / "checkpoint-4.complete").exists()
        restarted.append(start_moto(port, bucket))

    thread = threading.Thread(target=back_later)
    started = time.monotonic()
    thread.start()
    try:
        done = remote.upload(checkpoint, mirror)
        waited = time.monotonic() - started
    finally:
        thread.join()
        for process in restarted:
            process.kill()
    assert seen["marked during the outage"] is False  # nothing marked saved that is not
    assert waited >= OUTAGE_S and done is not None and done.files == 2 and done.bytes > 100_000
    assert (mirror / "trial-0" / "checkpoint-4.complete").is_file()
    messages = [r.getMessage() for r in caplog.records if r.name == "hpo.storage.outage"]
    assert len(messages) == 2 and messages[0].startswith("object store unreachable ("), messages
    assert messages[1].startswith("object store back after "), messages


def test_a_run_started_during_an_outage_waits_for_a_store_it_used_and_refuses_one_it_never_reached(store):
    """`hpo run` checks the store before any work: a store this machine used for the study (its mirror holds more
    than the URL's file) is waited for, as the database is; a mirror never used is refused at once (a mistyped
    endpoint must fail in seconds, not after storage.outage_timeout) (found by tests/chaos: seed 513556)."""
    port, bucket, mirror, server = store
    server.kill()
    server.wait()
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"study.output_dir: the object store at .* does not answer"):
        remote.check_store(mirror, "study.output_dir")
    assert time.monotonic() - started < OUTAGE_S / 2
    (mirror / ".hpo").mkdir()  # a run here used it
    restarted: list[subprocess.Popen] = []
    thread = threading.Timer(OUTAGE_S, lambda: restarted.append(start_moto(port, bucket)))
    started = time.monotonic()
    thread.start()
    try:
        remote.check_store(mirror, "study.output_dir")
        waited = time.monotonic() - started
    finally:
        thread.join()
        for process in restarted:
            process.kill()
    assert waited >= OUTAGE_S and outage.store_clock.outages and outage.store_clock.since is None
