"""Store fixtures: a SQLite store in a temporary folder, and a store on the PostgreSQL server of tests/conftest.py."""

from __future__ import annotations

import uuid

import pytest

from hpo.tracking.store import open_store


@pytest.fixture
def sqlite_store(tmp_path):
    store = open_store(tmp_path / "experiments.db")
    yield store
    store.close()


@pytest.fixture
def postgres_store(postgres_url):
    store = open_store(postgres_url)
    yield store
    store.close()


@pytest.fixture
def unique_study():
    """A study name no other test (or earlier CI run on the same database) has used."""
    return f"study-{uuid.uuid4().hex[:10]}"
