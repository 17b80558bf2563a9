"""Database URLs, the one place that knows their shapes: the SQLite file behind a URL, PostgreSQL URLs and their driver,
and a URL safe to print. Used by the Optuna storage, the experiment store and the dashboards alike."""

from __future__ import annotations

import importlib.util
from pathlib import Path

POSTGRES_PREFIXES = ("postgresql://", "postgresql+", "postgres://")


def is_sqlite_url(url: str) -> bool:
    return url.startswith("sqlite:")


def is_postgres_url(url: str) -> bool:
    return url.startswith(POSTGRES_PREFIXES)


def sqlite_path(url: str) -> Path | None:
    """The database file of a `sqlite:///path` URL; None for an in-memory database or another backend."""
    if not is_sqlite_url(url):
        return None
    rest = url.split(":///", 1)[1] if ":///" in url else ""
    rest = rest.split("?", 1)[0]
    if rest in ("", ":memory:"):
        return None
    return Path(rest)


def with_postgres_driver(url: str) -> str:
    """`postgres://` spelt as SQLAlchemy wants it, and a bare `postgresql://` pointed at psycopg2 when psycopg 3 (what
    SQLAlchemy 2 picks for a bare URL) is not installed but psycopg2 is. Other URLs come back unchanged."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if not url.startswith("postgresql://"):
        return url
    # find_spec, not import: telling which driver is installed must not load it.
    if importlib.util.find_spec("psycopg") is None and importlib.util.find_spec("psycopg2") is not None:
        return "postgresql+psycopg2://" + url[len("postgresql://") :]
    return url


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    credentials, host = rest.rsplit("@", 1)
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in credentials else url
