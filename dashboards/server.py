"""The dashboard's HTTP server: the standard library's threading server, read-only, localhost by default.

Why the standard library: the app serves a handful of fixed pages, fixed static files and a GET-only JSON API; a
framework would add dependencies and nothing the pages need. The safety rules live here:
- only GET and HEAD; anything else is 405 (the dashboard never writes);
- static files come from a table built at start-up (our `static/` folder plus Plotly's bundle from the installed
  `plotly` package), looked up by exact name, so no request path can reach another file;
- pages link static files by versioned URLs (`?v=<content hash>`), which the browser may cache for good; the same
  file asked for without its current version is revalidated by ETag. JSON and text go out gzipped when the browser
  accepts it (a 10,000-trial study answer: 4 MB -> 1 MB; Plotly's bundle: 4.8 MB -> 1.5 MB, compressed once);
- pages are fixed HTML shells holding no study data; the scripts fill them through the DOM with `textContent`;
- a Content-Security-Policy allows scripts only from this server (no inline script), so injected markup cannot run;
- the Host header must name this server, which defeats DNS-rebinding pages reading the API from a browser.
"""

from __future__ import annotations

import gzip
import hashlib
import mimetypes
import threading
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import plotly

from dashboards.api import ApiError, DashboardApi
from dashboards.jsonenc import encode_json, without_markup

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


# Bodies smaller than this are sent as they are: gzip would save less than its headers cost.
GZIP_MIN_BYTES = 1024
# A versioned static URL never changes content: the browser may keep it for a year without asking again.
IMMUTABLE = "public, max-age=31536000, immutable"


@dataclass
class StaticFile:
    """One servable file, read at start-up: its bytes, type, content hash (ETag and URL version) and gzip form."""

    body: bytes
    content_type: str
    version: str
    _gzipped: bytes | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def read(cls, path: Path) -> StaticFile:
        body = path.read_bytes()
        content_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        if content_type.startswith("text/") or content_type.endswith(("javascript", "json", "svg+xml")):
            content_type += "; charset=utf-8"
        return cls(body, content_type, hashlib.sha256(body).hexdigest()[:16])

    @property
    def etag(self) -> str:
        return f'"{self.version}"'

    def gzipped(self) -> bytes:
        """Compressed on first request, then kept (Plotly's bundle takes a quarter second to compress)."""
        with self._lock:
            if self._gzipped is None:
                self._gzipped = gzip.compress(self.body, compresslevel=6, mtime=0)
            return self._gzipped


def static_files() -> dict[str, StaticFile]:
    """Every file the server may send, by the name in `/static/<name>`."""
    files = {path.name: StaticFile.read(path) for path in STATIC_DIR.iterdir() if path.is_file()}
    files["plotly.min.js"] = StaticFile.read(PLOTLY_JS)
    return files


def static_url(files: dict[str, StaticFile], name: str) -> str:
    return f"/static/{name}?v={files[name].version}"


def render_page(title: str, script: str, files: dict[str, StaticFile]) -> bytes:
    """A page shell: `{{static:NAME}}` becomes NAME's versioned URL."""
    html = TEMPLATE.read_text(encoding="utf-8").replace("{{title}}", title).replace("{{script}}", script)
    for name in files:
        html = html.replace("{{static:" + name + "}}", static_url(files, name))
    if "{{" in html:
        raise RuntimeError(
            f"page template names a file that is not in static/: {html[html.index('{{') :][:60]}"
        )
    return html.encode("utf-8")


def accepts_gzip(accept_encoding: str) -> bool:
    """True when the request's Accept-Encoding lists gzip without q=0."""
    for item in accept_encoding.split(","):
        coding, _, params = item.strip().partition(";")
        if coding.strip().lower() in ("gzip", "*"):
            quality = params.strip().removeprefix("q=").strip() if params.strip().startswith("q=") else "1"
            try:
                return float(quality) > 0
            except ValueError:
                return True
    return False


class DashboardServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], api: DashboardApi) -> None:
        self.api = api
        self.files = static_files()
        self.pages = {path: render_page(title, script, self.files) for path, (title, script) in PAGES.items()}
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
            self._send(
                HTTPStatus.OK,
                self.server.pages[path],
                "text/html; charset=utf-8",
                {"Cache-Control": "no-cache"},
            )
        elif path.startswith("/static/"):
            self._send_static(path.removeprefix("/static/"), dict(parse_qsl(parts.query)).get("v"))
        elif path.startswith("/api/"):
            self._send_api(path, dict(parse_qsl(parts.query)))
        else:
            self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")

    def _send_static(self, name: str, version: str | None) -> None:
        file = self.server.files.get(name)
        if file is None:
            self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")
            return
        # The current version's URL is immutable; any other URL of the file must be revalidated (its ETag).
        cache = IMMUTABLE if version == file.version else "no-cache"
        zipped = len(file.body) >= GZIP_MIN_BYTES and accepts_gzip(self.headers.get("Accept-Encoding", ""))
        # Each encoding is its own representation, with its own ETag; either one names the current content.
        etag = f'"{file.version}-gzip"' if zipped else file.etag
        headers = {"Cache-Control": cache, "ETag": etag, "Vary": "Accept-Encoding"}
        asked = {tag.strip().removeprefix("W/") for tag in self.headers.get("If-None-Match", "").split(",")}
        if asked & {file.etag, f'"{file.version}-gzip"'}:
            self._send(HTTPStatus.NOT_MODIFIED, b"", file.content_type, headers)
            return
        if zipped:
            headers["Content-Encoding"] = "gzip"
        self._send(HTTPStatus.OK, file.gzipped() if zipped else file.body, file.content_type, headers)

    def _send_api(self, path: str, query: dict[str, str]) -> None:
        try:
            status, payload = HTTPStatus.OK, self.server.api.handle(path, query)
        except ApiError as error:
            status, payload = HTTPStatus(error.status), {"error": str(error)}
        except (
            Exception
        ) as error:  # one bad request must not take the server down; the page shows the message
            status, payload = HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"{type(error).__name__}: {error}"}
        body = without_markup(encode_json(payload)).encode("utf-8")  # study strings never arrive as markup
        headers = {"Cache-Control": "no-store", "Vary": "Accept-Encoding"}
        if len(body) >= GZIP_MIN_BYTES and accepts_gzip(self.headers.get("Accept-Encoding", "")):
            # level 1: 4 MB of trials in 60 ms to a quarter of the size; higher levels cost more than they save
            body = gzip.compress(body, compresslevel=1, mtime=0)
            headers["Content-Encoding"] = "gzip"
        self._send(status, body, "application/json", headers)

    def _send(
        self, status: HTTPStatus, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        if status != HTTPStatus.NOT_MODIFIED:  # a 304 has no body, and its length would not be the file's
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.send_body and status != HTTPStatus.NOT_MODIFIED:
            self.wfile.write(body)


def start_server(api: DashboardApi, host: str = "127.0.0.1", port: int = 8080) -> DashboardServer:
    """Bind and serve in a background thread (port 0 picks a free port); stop with `server.shutdown()`."""
    server = DashboardServer((host, port), api)
    threading.Thread(target=server.serve_forever, name="hpo-dashboard", daemon=True).start()
    return server
