"""An object store (`study.output_dir: s3://...`) that stops answering under an upload: the upload waits and is done
again whole once the store answers, and the checkpoint is marked saved (its marker, here and in the store) only then.

The test runs its own moto server (the suite's is shared by the other s3 tests) behind an OutageProxy
(tests/support/outage_proxy.py), which stops answering for a while: nothing listens on the store's port, open
connections are cut. Restarting moto instead would lose its bucket, and a client could reach the new server before
the bucket was made again (a missing bucket, not an outage)."""

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
from outage_proxy import OutageProxy

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


def start_moto(port: int) -> subprocess.Popen:
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
    return process


@pytest.fixture
def store(tmp_path, monkeypatch):
    """(proxy, mirror) of a study output folder in a moto server of this test's own, reached through the proxy."""
    port, bucket = free_port(), "outage"
    server = start_moto(port)
    proxy = OutageProxy(("127.0.0.1", port))
    proxy.up()
    for name, value in {
        "AWS_ENDPOINT_URL": proxy.url,
        "AWS_ACCESS_KEY_ID": "hpo-test",
        "AWS_SECRET_ACCESS_KEY": "hpo-test-secret",
        "AWS_DEFAULT_REGION": "us-east-1",
        "HPO_SCRATCH": str(tmp_path / "scratch"),
    }.items():
        monkeypatch.setenv(name, value)
    s3fs.S3FileSystem(skip_instance_cache=True).mkdir(bucket)
    monkeypatch.setattr(outage, "store_clock", outage.OutageClock(service="object store"))
    yield proxy, mirror_dir(f"s3://{bucket}/study")
    server.kill()


def test_an_upload_waits_for_the_store_and_marks_the_checkpoint_saved_only_once_stored(store, caplog):
    caplog.set_level(logging.WARNING, logger="hpo.storage.outage")
    proxy, mirror = store
    checkpoint = mirror / "trial-0" / "checkpoint-4"
    checkpoint.mkdir(parents=True)
    (checkpoint / "model.safetensors").write_bytes(b"w" * 100_000)
    (checkpoint / STATE_FILE).write_text(json.dumps({"global_step": 4}))
    seen: dict[str, object] = {}
    marker = mirror / "trial-0" / "checkpoint-4.complete"
    watch = threading.Timer(OUTAGE_S - 1, lambda: seen.update(marked_during_the_outage=marker.exists()))
    started = time.monotonic()
    proxy.down(OUTAGE_S)
    watch.start()
    done = remote.upload(checkpoint, mirror)
    waited = time.monotonic() - started
    watch.join()
    assert seen["marked_during_the_outage"] is False  # nothing marked saved that is not
    assert waited >= OUTAGE_S and done is not None and done.files == 2 and done.bytes > 100_000
    assert (mirror / "trial-0" / "checkpoint-4.complete").is_file()
    messages = [r.getMessage() for r in caplog.records if r.name == "hpo.storage.outage"]
    assert len(messages) == 2 and messages[0].startswith("object store unreachable ("), messages
    assert messages[1].startswith("object store back after "), messages


def test_a_run_started_during_an_outage_waits_for_a_store_it_used_and_refuses_one_it_never_reached(store):
    """`hpo run` checks the store before any work: a store this machine used for the study (its mirror holds the
    study's marker) is waited for, as the database is; a mirror never used is refused at once (a mistyped
    endpoint must fail in seconds, not after storage.outage_timeout) (found by tests/chaos: seed 513556)."""
    proxy, mirror = store
    proxy.down(OUTAGE_S)
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"study.output_dir: the object store at .* does not answer"):
        remote.check_store(mirror, "study.output_dir")
    assert time.monotonic() - started < OUTAGE_S / 2
    (mirror / ".hpo" / "logs").mkdir(parents=True)  # opened before the check: not a sign the store answered
    with pytest.raises(ConfigError, match="does not answer"):
        remote.check_store(mirror, "study.output_dir")
    (mirror / ".hpo" / "study.json").write_text("{}")  # a study ran here: the store answered it
    proxy.end_outage()
    proxy.down(OUTAGE_S)
    started = time.monotonic()
    remote.check_store(mirror, "study.output_dir")
    waited = time.monotonic() - started
    assert waited >= OUTAGE_S - 0.5 and outage.store_clock.outages and outage.store_clock.since is None
