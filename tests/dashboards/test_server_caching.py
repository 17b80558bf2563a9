"""What makes the study page fast to open: versioned, immutable static URLs; ETag revalidation; gzip when the browser
accepts it; Plotly's bundle not in the page's blocking scripts; a warmed-up server that has the trials' JSON ready."""

from __future__ import annotations

import gzip
import http.client
import json
import re
from urllib.parse import urlsplit

from dashboard_fixtures import STUDY
from test_server_safety import raw_get


def header_get(server, path: str, **headers: str) -> tuple[int, bytes, dict]:
    address = urlsplit(server.url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=10)
    connection.request("GET", path, headers=headers)
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, body, dict(response.getheaders())


def test_pages_link_versioned_static_files_that_are_cached_for_good(server):
    status, html, headers = raw_get(server, "/study?name=x")
    assert (
        status == 200 and headers["Cache-Control"] == "no-cache"
    )  # the shell: always asks, so new versions show
    urls = re.findall(rb'(?:src|href|content)="(/static/[\w.-]+\?v=[0-9a-f]{16})"', html)
    names = {url.split(b"?")[0].rsplit(b"/", 1)[1] for url in urls}
    assert {b"common.js", b"study.js", b"style.css", b"plotly.min.js"} <= names
    for url in urls:
        status, body, headers = raw_get(server, url.decode())
        assert status == 200 and body, url
        assert headers["Cache-Control"] == "public, max-age=31536000, immutable", url
    # The same file under an old version (or none) is not immutable: the browser revalidates it by ETag.
    status, _, headers = raw_get(server, "/static/study.js?v=0000000000000000")
    assert status == 200 and headers["Cache-Control"] == "no-cache"


def test_plotly_is_not_a_blocking_script_of_the_pages(server):
    for page in ["/", "/study?name=x", "/run?id=x", "/compare"]:
        _, html, _ = raw_get(server, page)
        scripts = re.findall(rb'<script src="([^"]+)"', html)
        assert scripts and not [s for s in scripts if b"plotly" in s], page
        assert re.search(rb'<meta name="hpo-plotly" content="/static/plotly.min.js\?v=[0-9a-f]{16}">', html)


def test_etag_revalidation_answers_304_without_a_body(server):
    status, body, headers = raw_get(server, "/static/common.js")
    etag = headers["ETag"]
    status, body, _ = header_get(server, "/static/common.js", **{"If-None-Match": etag})
    assert status == 304 and body == b""
    status, body, _ = header_get(server, "/static/common.js", **{"If-None-Match": '"stale"'})
    assert status == 200 and b"HPO" in body
    # The gzipped form has its own ETag (another representation); it revalidates too.
    _, _, headers = header_get(server, "/static/common.js", **{"Accept-Encoding": "gzip"})
    assert headers["ETag"] == etag[:-1] + '-gzip"'
    status, body, _ = header_get(
        server, "/static/common.js", **{"Accept-Encoding": "gzip", "If-None-Match": headers["ETag"]}
    )
    assert status == 304 and body == b""


def test_static_files_and_api_answers_are_gzipped_when_the_browser_accepts_it(server):
    _, plain_js, plain_headers = raw_get(server, "/static/plotly.min.js")
    assert "Content-Encoding" not in plain_headers  # no Accept-Encoding, no gzip
    status, packed, headers = header_get(server, "/static/plotly.min.js", **{"Accept-Encoding": "gzip, br"})
    assert status == 200 and headers["Content-Encoding"] == "gzip" and headers["Vary"] == "Accept-Encoding"
    assert gzip.decompress(packed) == plain_js and len(packed) < len(plain_js) / 2
    assert int(headers["Content-Length"]) == len(packed)

    path = "/api/study?name=" + STUDY
    _, plain_json, _ = raw_get(server, path)
    status, packed, headers = header_get(server, path, **{"Accept-Encoding": "gzip"})
    assert status == 200 and headers["Content-Encoding"] == "gzip" and headers["Cache-Control"] == "no-store"
    assert json.loads(gzip.decompress(packed))["summary"] == json.loads(plain_json)["summary"]
    # q=0 means "not gzip"
    _, _, headers = header_get(server, path, **{"Accept-Encoding": "gzip;q=0"})
    assert "Content-Encoding" not in headers


def test_warm_up_encodes_every_finished_trial_before_the_first_request(demo):
    from dashboards.api import DashboardApi
    from dashboards.optuna_source import OptunaSource
    from dashboards.store_reader import StoreReader

    api = DashboardApi(OptunaSource(demo["storage"]), StoreReader(None))
    assert api._finished_json == {}
    api.warm_up()
    finished = [t.number for t in demo["study"].get_trials() if t.state.is_finished()]
    assert sorted(n for name, n in api._finished_json if name == STUDY) == finished
