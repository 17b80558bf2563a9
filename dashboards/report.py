"""`hpo report`: one self-contained HTML file with the study page's plots, opening with no network.

The file inlines Plotly's bundle (from the installed `plotly` package), the dashboard's own style and scripts, and the
answers of every API call the study page makes, as JSON. The same scripts as the live page draw it, so the report
shows the same plots. A meta Content-Security-Policy forbids any network request from the file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from dashboards.api import DashboardApi
from dashboards.importance import compute_importance
from dashboards.jsonenc import encode_json, without_markup
from dashboards.server import PLOTLY_JS, STATIC_DIR
from hpo.errors import HpoError
from hpo.tracking.store.schema import trial_run_id

SCRIPTS = ["common.js", "table.js", "plots.js", "plotqueue.js", "runparts.js", "study.js", "report.js"]
REPORT_CSP = (
    "default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
    "img-src data: blob:; font-src data:; connect-src 'none'"
)
MAX_CURVE_RUNS = 5


def json_for_script(value: Any) -> str:
    """JSON that cannot end the <script> element it sits in, whatever strings the study holds."""
    return without_markup(encode_json(value))


def inline_script(source: str) -> str:
    # `</script` inside a script would end it early; `<\/` means the same to JavaScript.
    return "<script>" + source.replace("</script", "<\\/script").replace("<!--", "<\\!--") + "</script>"


def report_data(api: DashboardApi, study_name: str) -> dict[str, Any]:
    """Every API answer the study page asks for, plus the best trials' runs for their curves."""
    study_answer = api.handle("/api/study", {"name": study_name})
    study = api.source.study(study_name)
    trials = api.source.trials(study_name)
    answers: dict[str, list[list[Any]]] = {"/api/study": [[{"name": study_name}, study_answer]]}
    answers["/api/importance"] = []
    n_complete = study_answer["summary"]["states"]["COMPLETE"]
    for objective in range(len(study.directions)):
        try:
            importances = compute_importance(study, trials, objective) if n_complete >= 2 else {}
            note = None if n_complete >= 2 else "needs at least 2 completed trials"
        except Exception as error:
            importances, note = {}, f"could not compute importance: {error}"
        answer = {
            "study": study_name,
            "objective": objective,
            "status": "ready",
            "importances": importances,
            "note": note,
        }
        answers["/api/importance"].append([{"study": study_name, "objective": str(objective)}, answer])
    run_ids = [
        trial_run_id(study_name, number)
        for number in study_answer["summary"]["best"]["numbers"][:MAX_CURVE_RUNS]
    ]
    answers["/api/run"] = [[{"id": run_id}, api.handle("/api/run", {"id": run_id})] for run_id in run_ids]
    return {"study": study_name, "runs": run_ids, "api": answers}


def render_report(data: dict[str, Any]) -> str:
    style = (STATIC_DIR / "style.css").read_text(encoding="utf-8")
    scripts = [PLOTLY_JS.read_text(encoding="utf-8")] + [
        (STATIC_DIR / name).read_text(encoding="utf-8") for name in SCRIPTS
    ]
    title = f"{data['study']} · hpo report"
    escaped_title = title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "\n".join(
        [
            "<!doctype html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{REPORT_CSP}">',
            f"<title>{escaped_title}</title>",
            f"<style>{style}</style>",
            "</head><body>",
            '<header class="topbar"><span class="brand">hpo report</span><span id="status" class="status"></span></header>',
            '<main id="app"><p class="muted">Loading…</p></main>',
            f'<script type="application/json" id="hpo-report-data">{json_for_script(data)}</script>',
            inline_script(
                'window.HPO_REPORT = JSON.parse(document.getElementById("hpo-report-data").textContent);'
            ),
            *[inline_script(source) for source in scripts],
            "</body></html>",
        ]
    )


def write_report(api: DashboardApi, study_name: str, out: Path) -> Path:
    """Write the report atomically: a half-written file never replaces a good one."""
    if api.source is None or api.source.study(study_name) is None:
        raise HpoError(f"no study named {study_name!r} in the storage; check the study file's `study.name`")
    html = render_report(report_data(api, study_name))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(
        "w", encoding="utf-8", dir=out.parent, suffix=".tmp", delete=False
    ) as handle:
        handle.write(html)
    # mkstemp makes the file owner-only; a report is for sharing, so give it the mode a plain open() would.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(handle.name, 0o666 & ~umask)
    os.replace(handle.name, out)
    return out
