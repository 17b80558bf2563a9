"""The object store's cost per checkpoint: upload (files, then the marker) and fetch into another machine's mirror,
through hpo.storage.remote, for checkpoints of a few sizes.

    bash .ci/s3.sh start                                     # moto's S3 server on loopback; prints its URL
    AWS_ENDPOINT_URL=<that URL> python bench/overhead/object_store.py # or any S3 endpoint and bucket you have
    python bench/overhead/object_store.py --url file:///tmp/store     # fsspec's local file system, for comparison

A checkpoint here is what the Trainer writes for a model of that size: model.safetensors, optimizer.pt (twice the
weights, Adam's two moments), trainer_state.json and a few small files. Each size is uploaded and fetched `--repeats`
times (a new step each time); the median is printed. The study-level figures (bytes per trial, fetch time per promotion
and retry on a 2-task SLURM array) are printed by `pytest -m s3 -s` (tests/slurm/test_slurm_object_store.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import uuid
from pathlib import Path

from hpo.spec.output_url import SCRATCH_VARIABLE, mirror_dir
from hpo.storage import remote

SIZES_MB = (1, 10, 100)


def write_checkpoint(folder: Path, megabytes: int, step: int) -> Path:
    checkpoint = folder / "trial-0" / f"checkpoint-{step}"
    checkpoint.mkdir(parents=True)
    weights = megabytes * 1024 * 1024 // 3
    (checkpoint / "model.safetensors").write_bytes(os.urandom(weights))
    (checkpoint / "optimizer.pt").write_bytes(os.urandom(2 * weights))
    (checkpoint / "scheduler.pt").write_bytes(os.urandom(1024))
    (checkpoint / "rng_state_0.pth").write_bytes(os.urandom(16 * 1024))
    (checkpoint / "training_args.json").write_text(json.dumps({"step": step}))
    (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return checkpoint


def mirror(url: str, scratch: Path) -> Path:
    os.environ[SCRATCH_VARIABLE] = str(scratch)
    return mirror_dir(url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="default: s3://<a new bucket>/bench on AWS_ENDPOINT_URL")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    url = args.url
    if url is None:
        import s3fs

        bucket = f"hpo-bench-{uuid.uuid4().hex[:8]}"
        s3fs.S3FileSystem().mkdir(bucket)
        url = f"s3://{bucket}/bench"
    remote.check_url(url, "--url")
    with tempfile.TemporaryDirectory() as scratch:
        writer, reader = mirror(url, Path(scratch) / "a"), mirror(url, Path(scratch) / "b")
        print(f"{url}: median of {args.repeats}")
        for megabytes in SIZES_MB:
            ups, downs, sizes = [], [], []
            for repeat in range(args.repeats):
                step = megabytes * 100 + repeat
                sent = remote.upload(write_checkpoint(writer, megabytes, step), writer)
                assert sent is not None
                _, fetched = remote.fetch(writer / "trial-0" / f"checkpoint-{step}", reader)
                assert fetched is not None and fetched.bytes == sent.bytes
                ups.append(sent.seconds)
                downs.append(fetched.seconds)
                sizes.append(sent.bytes)
                remote.remove(writer / "trial-0" / f"checkpoint-{step}", writer)
            size = statistics.median(sizes) / 1e6
            up, down = statistics.median(ups), statistics.median(downs)
            print(
                f"  {size:7.1f} MB checkpoint: upload {up:6.2f} s ({size / up:6.1f} MB/s), "
                f"fetch {down:6.2f} s ({size / down:6.1f} MB/s)"
            )


if __name__ == "__main__":
    main()
