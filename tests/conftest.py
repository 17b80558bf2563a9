"""Shared test fixtures. Following Lightning's tests: fail a test that leaks environment variables or a process group."""

from __future__ import annotations

import os

import pytest

# One thread per process: the machines have 2 cores and tests run subprocesses beside each other.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault(
    "MLFLOW_DISABLE_TELEMETRY", "true"
)  # MLflow 3 reports usage to its servers unless told not to


@pytest.fixture(autouse=True)
def no_leaked_environment():
    before = dict(os.environ)
    yield
    leaked = {k for k in os.environ if k not in before} | {
        k for k in before if os.environ.get(k) != before[k]
    }
    # torch sets TORCHINDUCTOR_* and deepspeed PYTORCH_NVML_BASED_CUDA_CHECK on import, MLflow its experiment
    # (set_experiment) and telemetry session for child processes: not the test's doing.
    ignored = (
        "PYTEST_",
        "WANDB_",
        "COV_",
        "TORCHINDUCTOR_",
        "PYTORCH_NVML_BASED_CUDA_CHECK",
        "MLFLOW_EXPERIMENT_ID",
        "_MLFLOW_TELEMETRY_",
    )
    leaked = {k for k in leaked if not k.startswith(ignored)}
    os.environ.clear()
    os.environ.update(before)
    assert not leaked, f"test leaked environment variables: {sorted(leaked)}"


@pytest.fixture(autouse=True)
def no_leaked_process_group():
    yield
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
        pytest.fail("test left a torch.distributed process group initialized")


@pytest.fixture
def postgres_url() -> str:
    """The PostgreSQL server `.ci/run` starts (`bash .ci/postgres.sh start` prints the URL). Without it a developer's
    run skips; a CI run fails, so a missing server can never pass as skipped tests."""
    url = os.environ.get("HPO_TEST_POSTGRES_URL")
    if url:
        return url
    message = "HPO_TEST_POSTGRES_URL is not set: start a server with `bash .ci/postgres.sh start` and export its URL"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def pg_data() -> str:
    """The loopback server's data folder (`HPO_PG_DATA`), for tests that stop and start it. Without it a developer's run
    skips; a CI run fails, as for the server's URL."""
    data = os.environ.get("HPO_PG_DATA")
    if data:
        return data
    message = (
        "HPO_PG_DATA is not set: the server's data folder is needed to stop and start it (.ci/run sets it)"
    )
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def s3_endpoint() -> str:
    """The S3 API `.ci/run` starts on loopback (`bash .ci/s3.sh start` prints the URL: moto's server). Without it a
    developer's run skips; a CI run fails, as for PostgreSQL."""
    url = os.environ.get("HPO_TEST_S3_ENDPOINT")
    if url:
        return url
    message = "HPO_TEST_S3_ENDPOINT is not set: start a server with `bash .ci/s3.sh start` and export its URL"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def s3_bucket(s3_endpoint, monkeypatch) -> str:
    """A new, empty bucket on the loopback server; this test's environment reaches it as any s3fs client does
    (AWS_ENDPOINT_URL and a key pair, which moto does not check). Its name."""
    import uuid

    import s3fs

    for name, value in {
        "AWS_ENDPOINT_URL": s3_endpoint,
        "AWS_ACCESS_KEY_ID": "hpo-test",
        "AWS_SECRET_ACCESS_KEY": "hpo-test-secret",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    bucket = f"hpo-{uuid.uuid4().hex[:12]}"
    s3fs.S3FileSystem(skip_instance_cache=True).mkdir(bucket)
    return bucket
