"""Fixtures of the dashboard tests: a real study database and experiment store, and a running dashboard server."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import optuna
import optuna.importance  # noqa: F401  (imports scikit-learn, which sets KMP_* variables: before any test's check)
import pytest
from dashboard_cli import TINY_RUN, TINY_STUDY, hpo
from dashboard_fixtures import build_everything

from dashboards.api import DashboardApi
from dashboards.locate import open_api
from dashboards.optuna_source import OptunaSource
from dashboards.server import start_server
from dashboards.store_reader import StoreReader
from hpo.cli.dashboard import locate

STUDY_FILE = "studies/demo.yaml"


@pytest.fixture(scope="session")
def real(tmp_path_factory) -> dict:
    """A study made by really running `hpo run` on tiny_study.yaml (6 digits trials, each in its own process: one
    fails, the pruner stops one or more), and a single `hpo train` run recorded in the same experiment store."""
    folder = tmp_path_factory.mktemp("real-study")
    output = f"study.output_dir={folder}"
    hpo("run", str(TINY_STUDY), "--set", output, "--workers", "1")  # the real scheduler: a process per trial
    store = folder / "experiments.db"
    hpo("train", str(TINY_RUN), "--output-dir", str(folder / "single"), "--set", f"tracking.store={store}")
    sources = locate(TINY_STUDY, None, None, (output,))
    study = optuna.load_study(study_name=sources.study_name, storage=sources.storage)
    return {"folder": folder, "overrides": (output,), "sources": sources, "study": study, "store": store}


@pytest.fixture(scope="session")
def real_client(real):
    server = start_server(open_api(real["sources"]), "127.0.0.1", 0)
    yield Client(server.url)
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def demo(tmp_path_factory) -> dict:
    """Two real studies (study.db) and an experiment store (experiments.db), built once per session."""
    return build_everything(tmp_path_factory.mktemp("dashboard-demo"))


@pytest.fixture(scope="session")
def server(demo):
    api = DashboardApi(OptunaSource(demo["storage"]), StoreReader(demo["store"]), study_file=STUDY_FILE)
    running = start_server(api, "127.0.0.1", 0)
    yield running
    running.shutdown()
    running.server_close()


class Client:
    def __init__(self, base: str) -> None:
        self.base = base

    def get(self, path: str) -> tuple[int, dict]:
        try:
            with urllib.request.urlopen(self.base + path, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def json(self, path: str) -> dict:
        status, body = self.get(path)
        assert status == 200, (path, status, body)
        return body


@pytest.fixture(scope="session")
def client(server) -> Client:
    return Client(server.url)


@pytest.fixture
def artifacts_dir() -> Path:
    folder = Path(__file__).resolve().parents[2] / "test-artifacts" / "dashboards"
    folder.mkdir(parents=True, exist_ok=True)
    return folder
