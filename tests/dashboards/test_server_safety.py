"""The server is read-only, serves only its own assets, refuses foreign Host headers, and never writes the storage."""

from __future__ import annotations

import hashlib
import http.client
import socket
from pathlib import Path
from urllib.parse import urlsplit

import optuna
import pytest
from dashboard_fixtures import STUDY

from hpo.errors import HpoError


def raw_get(server, path: str, method: str = "GET", host: str | None = None) -> tuple[int, bytes, dict]:
    """A request with the path exactly as given (no client-side normalisation of `..`)."""
    address = urlsplit(server.url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=10)
    connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    connection.putheader("Host", host or address.netloc)
    connection.endheaders()
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, body, dict(response.getheaders())


@pytest.mark.parametrize(
    "path",
    [
        "/static/../server.py",
        "/static/..%2fserver.py",
        "/static/%2e%2e/%2e%2e/pyproject.toml",
        "/static/../../../../../../etc/passwd",
        "/static//etc/passwd",
        "/static/%2Fetc%2Fpasswd",
        "/../../etc/passwd",
        "/static/..\\server.py",
        "/templates/page.html",
        "/dashboards/server.py",
    ],
)
def test_path_traversal_is_refused(server, path):
    status, body, _ = raw_get(server, path)
    assert status == 404
    assert b"root:" not in body and b"import" not in body and b"[project]" not in body


def test_own_assets_and_plotly_are_served_from_the_package(server):
    status, body, headers = raw_get(server, "/static/plotly.min.js")
    assert status == 200 and headers["Content-Type"].startswith("text/javascript") and len(body) > 1_000_000
    status, body, _ = raw_get(server, "/static/study.js")
    assert status == 200 and b"StudyView" in body


def test_pages_carry_no_study_data_and_a_strict_content_security_policy(server):
    status, body, headers = raw_get(server, "/study?name=%3Cscript%3Ealert(1)%3C/script%3E")
    assert status == 200
    assert b"alert(1)" not in body  # the shell never echoes the query; scripts read it and use textContent
    policy = headers["Content-Security-Policy"]
    assert (
        "script-src 'self'" in policy and "'unsafe-inline'" not in policy.split("script-src")[1].split(";")[0]
    )
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert b"http://" not in body and b"https://" not in body  # nothing from a CDN


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_the_dashboard_is_read_only(server, method):
    status, _, headers = raw_get(server, "/api/studies", method=method)
    assert status == 405 and headers["Allow"] == "GET, HEAD"


def test_a_foreign_host_header_is_refused(server):
    """A DNS-rebinding page (evil.example resolving to 127.0.0.1) cannot read the API."""
    status, _, _ = raw_get(server, "/api/studies", host="evil.example:8080")
    assert status == 403
    assert raw_get(server, "/api/studies", host="localhost:" + str(server.server_address[1]))[0] == 200


def test_default_bind_is_loopback_only(server):
    assert server.server_address[0] == "127.0.0.1"
    outside = [ip for ip in socket.gethostbyname_ex(socket.gethostname())[2] if not ip.startswith("127.")]
    if not outside:
        pytest.skip("this machine has no non-loopback address to try")
    with pytest.raises(OSError):
        socket.create_connection((outside[0], server.server_address[1]), timeout=2)


def test_reading_never_writes_the_study_database(client, demo):
    database = Path(demo["storage"].removeprefix("sqlite:///"))
    before = hashlib.sha256(database.read_bytes()).hexdigest()
    for path in ["/api/studies", f"/api/study?name={STUDY}", f"/api/run?id={STUDY}/trial-1", "/api/runs"]:
        client.json(path)
    assert hashlib.sha256(database.read_bytes()).hexdigest() == before


def test_the_storage_is_opened_read_only(demo):
    from dashboards.optuna_source import OptunaSource

    study = OptunaSource(demo["storage"]).study(STUDY)
    with pytest.raises(optuna.exceptions.StorageInternalError) as refused:
        study.set_user_attr("written_by_dashboard", True)
    assert "readonly database" in str(refused.value.__cause__)


def test_a_missing_database_is_a_clear_error_and_is_not_created(tmp_path):
    from dashboards.optuna_source import OptunaSource

    missing = tmp_path / "runs" / "study.db"
    with pytest.raises(HpoError, match="no study database at .*hpo run"):
        OptunaSource(f"sqlite:///{missing}")
    assert not missing.exists()
