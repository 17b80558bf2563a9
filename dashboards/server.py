"""The dashboard's HTTP server: the standard library's threading server, read-only, localhost by default.

Why the standard library: the app serves a handful of fixed pages, fixed static files and a GET-only JSON API; a
framework would add dependencies and nothing the pages need. The safety rules live here:
- only GET and HEAD; anything else is 405 (the dashboard never writes);
- static files come from a table built at start-up (our `static/` folder plus Plotly's bundle from the installed
  `plotly` package), looked up by exact name, so no request path can reach another file;
- pages are fixed HTML shells holding no study data; the scripts fill them through the DOM with `textContent`;
- a Content-Security-Policy allows scripts only from this server (no inline script), so injected markup cannot run;
- the Host header must name this server, which defeats DNS-rebinding pages reading the API from a browser.
"""

from __future__ import annotations

import mimetypes
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import plotly

from dashboards.api import ApiError, DashboardApi
from dashboards.jsonenc import encode_json

PACKAGE_DIR = Path(__file__).resolve().parent
STATIC_DIR = PACKAGE_DIR / "static"
TEMPLATE = PACKAGE_DIR / "templates" / "page.html"
PLOTLY_JS = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"

# page path -> (title, the page's script in static/)
PAGES = {
    "/": ("Studies", "overview.js"),
    "/study": ("Study", "study.js"),
    "/run": ("Run", "run.js"),
    "/compare": ("Compare", "compare.js"),
}

LOOPBACK = {"127.0.0.1", "localhost", "::1"}

CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-eval'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)


def static_files() -> dict[str, Path]:
    """Every file the server may send, by the name in `/static/<name>`."""
    files = {path.name: path for path in STATIC_DIR.iterdir() if path.is_file()}
    files["plotly.min.js"] = PLOTLY_JS
    return files


def render_page(title: str, script: str) -> bytes:
    html = TEMPLATE.read_text(encoding="utf-8")
    return html.replace("{{title}}", title).replace("{{script}}", script).encode("utf-8")


class DashboardServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], api: DashboardApi) -> None:
        self.api = api
        self.files = static_files()
        self.pages = {path: render_page(title, script) for path, (title, script) in PAGES.items()}
        super().__init__(address, DashboardHandler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def host_allowed(self, host_header: str) -> bool:
        """On loopback only requests naming this server; bound wider on purpose (--host), any name."""
        host, port = self.server_address[:2]
        if host not in LOOPBACK:
            return True
        names = {host, "localhost", "127.0.0.1", "[::1]"}
        return host_header in names or host_header in {f"{name}:{port}" for name in names}


class DashboardHandler(BaseHTTPRequestHandler):
    server: DashboardServer
    server_version = "hpo-dashboard"
    sys_version = ""
    send_body = True

    def log_message(
        self, format: str, *args: Any
    ) -> None:  # quiet: the terminal shows the URL, not every poll
        pass

    def do_GET(self) -> None:
        self._serve(send_body=True)

    def do_HEAD(self) -> None:
        self._serve(send_body=False)

    def _refuse(self) -> None:
        self._send(
            HTTPStatus.METHOD_NOT_ALLOWED, b"read-only dashboard\n", "text/plain", {"Allow": "GET, HEAD"}
        )

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse

    def _serve(self, send_body: bool) -> None:
        self.send_body = send_body
        if not self.server.host_allowed(self.headers.get("Host", "")):
            self._send(HTTPStatus.FORBIDDEN, b"unknown Host header\n", "text/plain")
            return
        parts = urlsplit(self.path)
        path = parts.path
        if path in self.server.pages:
            self._send(HTTPStatus.OK, self.server.pages[path], "text/html; charset=utf-8")
        elif path.startswith("/static/"):
            self._send_static(path.removeprefix("/static/"))
        elif path.startswith("/api/"):
            self._send_api(path, dict(parse_qsl(parts.query)))
        else:
            self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")

    def _send_static(self, name: str) -> None:
        file = self.server.files.get(name)
        if file is None:
            self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")
            return
        content_type = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        if content_type.startswith("text/") or content_type.endswith("javascript"):
            content_type += "; charset=utf-8"
        self._send(HTTPStatus.OK, file.read_bytes(), content_type, {"Cache-Control": "max-age=3600"})

    def _send_api(self, path: str, query: dict[str, str]) -> None:
        try:
            status, payload = HTTPStatus.OK, self.server.api.handle(path, query)
        except ApiError as error:
            status, payload = HTTPStatus(error.status), {"error": str(error)}
        except (
            Exception
        ) as error:  # one bad request must not take the server down; the page shows the message
            status, payload = HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"{type(error).__name__}: {error}"}
        body = encode_json(payload).encode("utf-8")
        self._send(status, body, "application/json", {"Cache-Control": "no-store"})

    def _send(
        self, status: HTTPStatus, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.send_body:
            self.wfile.write(body)


def start_server(api: DashboardApi, host: str = "127.0.0.1", port: int = 8080) -> DashboardServer:
    """Bind and serve in a background thread (port 0 picks a free port); stop with `server.shutdown()`."""
    server = DashboardServer((host, port), api)
    threading.Thread(target=server.serve_forever, name="hpo-dashboard", daemon=True).start()
    return server
