// The overview: every study in the storage (directions, trials by state, best value, what runs now) and the single
// runs of `hpo train` in the experiment store, with a picker to compare two of them.
"use strict";

function studyColumns() {
  const h = HPO.h;
  return [
    { key: "name", label: "study", value: (s) => s.name, cell: (s) => HPO.link("/study", { name: s.name }, s.name) },
    { key: "directions", label: "direction(s)", value: (s) => s.objectives.map((o, i) => o + ": " + s.directions[i]).join(", ") },
    { key: "n_trials", label: "trials", numeric: true, value: (s) => s.n_trials },
    {
      key: "states", label: "by state", value: (s) => HPO.STATES.map((st) => s.states[st]).join(" "),
      cell: (s) => h("span", { className: "chips" }, HPO.STATES.filter((st) => s.states[st]).map((st) => HPO.stateChip(st, s.states[st]))),
    },
    {
      key: "best", label: "best", numeric: true,
      value: (s) => (s.best.values ? s.best.values[0] : s.best.numbers.length ? s.best.numbers.length : null),
      cell: (s) => (s.best.values ? HPO.fmt(s.best.values[0]) + " (trial " + s.best.numbers[0] + ")"
        : s.best.numbers.length ? s.best.numbers.length + " on the Pareto front" : "—"),
    },
    {
      key: "running", label: "running now", value: (s) => s.running.length,
      cell: (s) => (s.running.length ? s.running.map((r) => "#" + r.number + (r.slot !== null && r.slot !== undefined ? " (slot " + HPO.fmt(r.slot) + ")" : "")).join(", ") : "—"),
    },
    { key: "last", label: "last activity", value: (s) => s.last_activity, cell: (s) => HPO.fmtTime(s.last_activity) },
  ];
}

function runColumns(selected, onSelect) {
  const h = HPO.h;
  return [
    {
      key: "pick", label: "compare", searchable: false, value: (r) => (selected.has(r.id) ? 1 : 0),
      cell: (r) => {
        const box = h("input", { type: "checkbox", checked: selected.has(r.id), "aria-label": "compare " + r.id });
        box.addEventListener("change", () => onSelect(r.id, box.checked));
        return box;
      },
    },
    { key: "name", label: "run", value: (r) => r.name || r.id, cell: (r) => HPO.link("/run", { id: r.id }, r.name || r.id) },
    { key: "status", label: "status", value: (r) => r.status },
    { key: "objective", label: "objective", numeric: true, value: (r) => r.objective },
    { key: "started", label: "started", value: (r) => r.started_at, cell: (r) => HPO.fmtTime(r.started_at) },
    { key: "duration", label: "duration", numeric: true, value: (r) => (r.ended_at && r.started_at ? r.ended_at - r.started_at : null), cell: (r) => HPO.fmtDuration(r.ended_at && r.started_at ? r.ended_at - r.started_at : null) },
    { key: "host", label: "host", value: (r) => r.host },
    { key: "output_dir", label: "output dir", value: (r) => r.output_dir },
  ];
}

HPO.start(async (app) => {
  const h = HPO.h;
  const [studies, runs] = await Promise.all([HPO.api("/api/studies"), HPO.api("/api/runs", { kind: "run" })]);
  const selected = new Set();
  const compareLink = h("a", { className: "compare-link" }, "");
  const updateCompare = () => {
    const ids = [...selected];
    compareLink.textContent = ids.length === 2 ? "compare the two selected runs" : "tick two runs to compare them";
    if (ids.length === 2) compareLink.setAttribute("href", "/compare?" + HPO.query({ a: ids[0], b: ids[1] }));
    else compareLink.removeAttribute("href");
  };
  const studiesHost = h("div");
  const runsHost = h("div");
  const source = studies.study_file ? "study file " + studies.study_file : "storage " + (studies.storage || "none");
  HPO.append(HPO.clear(app), [
    h("h1", {}, "Studies"),
    h("p", { className: "muted" }, source),
    HPO.card("Studies", studiesHost, { wide: true, id: "studies" }),
    h("div", { style: "height:16px" }),
    HPO.card("Single runs (hpo train)", [runsHost, h("p", {}, compareLink)], { wide: true, id: "runs" }),
  ]);
  const studyTable = new HPO.Table(studiesHost, { columns: studyColumns(), sortKey: "last", sortDir: -1, placeholder: "filter studies" });
  const runTable = new HPO.Table(runsHost, {
    columns: runColumns(selected, (id, on) => {
      if (on) selected.add(id); else selected.delete(id);
      updateCompare();
    }),
    sortKey: "started", sortDir: -1, placeholder: "filter runs",
  });
  studyTable.setRows(studies.studies);
  runTable.setRows(runs.runs);
  updateCompare();
  HPO.markPainted();
  HPO.poll(async () => {
    const [fresh, freshRuns] = await Promise.all([HPO.api("/api/studies"), HPO.api("/api/runs", { kind: "run" })]);
    studyTable.setRows(fresh.studies);
    runTable.setRows(freshRuns.runs);
  }, 3000);
});
