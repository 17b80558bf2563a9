"""Which PostgreSQL driver a URL gets: SQLAlchemy's default (psycopg 3) for a bare `postgresql://` when it is
installed, psycopg2 for a user who has only that; an explicit driver and other databases are left alone."""

from __future__ import annotations

import sys

import pytest

from hpo.storage.urls import with_postgres_driver

URL = "postgresql://hpo:secret@db.example:5432/studies"


def test_a_bare_url_stays_bare_with_psycopg_3_installed():
    assert with_postgres_driver(URL) == URL
    assert with_postgres_driver("postgres://u@h/d") == "postgresql://u@h/d"  # the spelling SQLAlchemy wants


@pytest.fixture
def only_psycopg2(tmp_path, monkeypatch):
    """An environment with psycopg2 and without psycopg 3, as importlib sees it (psycopg2 is not in the lock: an
    importable package of that name stands in for it; only which driver the URL names is under test)."""
    monkeypatch.setitem(sys.modules, "psycopg", None)
    monkeypatch.delitem(sys.modules, "psycopg2", raising=False)
    (tmp_path / "psycopg2").mkdir()
    (tmp_path / "psycopg2" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))


def test_a_user_with_only_psycopg2_gets_it_named(only_psycopg2):
    assert with_postgres_driver(URL) == "postgresql+psycopg2://hpo:secret@db.example:5432/studies"


@pytest.mark.parametrize(
    "url", ["postgresql+psycopg://u@h/d", "postgresql+psycopg2://u@h/d", "sqlite:///x.db"]
)
def test_an_explicit_driver_or_another_database_is_left_alone(only_psycopg2, url):
    assert with_postgres_driver(url) == url
