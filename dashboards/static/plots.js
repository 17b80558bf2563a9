// The study and run plots, drawn with Plotly from the trials the API returns. Each plot is a handful of traces whatever
// the number of trials (lines joined with null gaps, one trace per state), which is what keeps 10,000 trials fast.
"use strict";

HPO.plots = {};

// Plotly renders a few HTML tags in labels; escape study strings so they show as text.
HPO.plotText = function plotText(value) {
  return HPO.fmt(value).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
};

// Long category labels (a choice can be any string) are cut for axes; hover and the table show them whole.
HPO.short = function short(value, length) {
  const text = HPO.fmt(value);
  return text.length > length ? text.slice(0, length - 1) + "…" : text;
};

const BASE_LAYOUT = {
  margin: { l: 60, r: 20, t: 16, b: 44 },
  font: { size: 11, family: "system-ui, sans-serif" },
  paper_bgcolor: "#fff",
  plot_bgcolor: "#fff",
  hovermode: "closest",
  showlegend: true,
  legend: { orientation: "h", x: 0, y: 1.1 },
  xaxis: { gridcolor: "#eef0f4", zeroline: false },
  yaxis: { gridcolor: "#eef0f4", zeroline: false },
};
const CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };

// Waits for Plotly's bundle (loaded on first use, see HPO.loadPlotly) and draws.
HPO.plots.render = async function render(div, traces, layout) {
  const merged = Object.assign({}, BASE_LAYOUT, layout || {});
  for (const axis of ["xaxis", "yaxis"]) merged[axis] = Object.assign({}, BASE_LAYOUT[axis], (layout || {})[axis] || {});
  const Plotly = await HPO.loadPlotly();
  return Plotly.react(div, traces, merged, CONFIG);
};

HPO.plots.empty = function empty(div, message) {
  return HPO.plots.render(div, [], {
    showlegend: false,
    xaxis: { visible: false }, yaxis: { visible: false },
    annotations: [{ text: HPO.plotText(message), showarrow: false, font: { size: 13, color: "#6b7385" }, xref: "paper", yref: "paper", x: 0.5, y: 0.5 }],
  });
};

function objectiveValue(trial, objective) {
  return trial.values && trial.values.length > objective ? trial.values[objective] : null;
}

function completeTrials(study, objective) {
  return study.trials.filter((t) => t.state === "COMPLETE" && objectiveValue(t, objective) !== null);
}

function objectiveLabel(study, objective) {
  return HPO.plotText(study.summary.objectives[objective] || "objective");
}

function minimizes(study, objective) {
  return study.summary.directions[objective] !== "maximize";
}

HPO.plots.history = function history(div, study, objective) {
  const complete = completeTrials(study, objective);
  if (!complete.length) return HPO.plots.empty(div, "no completed trials yet");
  const x = [], y = [], text = [], bestX = [], bestY = [];
  const better = minimizes(study, objective) ? (a, b) => a < b : (a, b) => a > b;
  let best = null;
  for (const trial of complete) {
    const value = objectiveValue(trial, objective);
    // The best-so-far step line needs a point only where the best improves (and one at the end).
    if (best === null || better(value, best)) { best = value; bestX.push(trial.number); bestY.push(best); }
    x.push(trial.number); y.push(value); text.push("trial " + trial.number);
  }
  bestX.push(x[x.length - 1]); bestY.push(best);
  return HPO.plots.render(div, [
    { type: markerType(x.length), mode: "markers", name: "trial value", x, y, text, marker: { size: 5, color: HPO.STATE_COLORS.COMPLETE, opacity: 0.7 }, hovertemplate: "%{text}<br>%{y}<extra></extra>" },
    { type: "scatter", mode: "lines", name: "best so far", x: bestX, y: bestY, line: { color: "#d62728", width: 2, shape: "hv" }, hoverinfo: "skip" },
  ], {
    // trial numbers are integers: no 1.5 ticks on a short axis
    xaxis: { title: { text: "trial" }, dtick: x[x.length - 1] - x[0] < 10 ? 1 : undefined },
    yaxis: { title: { text: objectiveLabel(study, objective) } },
  });
};

// Above this many curves the intermediate values are drawn as a density (10,000 overlapping lines say less than a
// heat map, and draw 20 times slower), with the best trials' curves on top and the pruning steps counted below.
const DENSITY_CURVES = 1000;
// Above this many markers a scatter is drawn with WebGL: SVG needs one DOM node per marker.
const WEBGL_MARKERS = 2000;

function markerType(points) {
  return points > WEBGL_MARKERS ? "scattergl" : "scatter";
}

HPO.plots.intermediate = function intermediate(div, study) {
  const curves = study.trials.filter((t) => t.intermediate.length);
  if (!curves.length) return HPO.plots.empty(div, "no intermediate values reported yet");
  if (curves.length > DENSITY_CURVES) return intermediateDensity(div, study, curves);
  const traces = {};
  const stops = { x: [], y: [], text: [] };
  for (const trial of curves) {
    const trace = traces[trial.state] || (traces[trial.state] = { x: [], y: [], text: [] });
    const label = "trial " + trial.number;
    for (const [step, value] of trial.intermediate) {
      trace.x.push(step); trace.y.push(value); trace.text.push(label);
    }
    trace.x.push(null); trace.y.push(null); trace.text.push("");
    if (trial.state === "PRUNED") {
      const [step, value] = trial.intermediate[trial.intermediate.length - 1];
      stops.x.push(step); stops.y.push(value); stops.text.push(label + " pruned at step " + step);
    }
  }
  const opacity = curves.length > 300 ? 0.3 : 0.7;
  const lines = HPO.STATES.filter((state) => traces[state]).map((state) => ({
    type: "scatter", mode: "lines", name: state.toLowerCase(), x: traces[state].x, y: traces[state].y, text: traces[state].text,
    connectgaps: false, line: { color: HPO.STATE_COLORS[state], width: 1 }, opacity,
    hovertemplate: "%{text}<br>step %{x}: %{y}<extra></extra>",
  }));
  lines.push({
    type: "scatter", mode: "markers", name: "pruned here", x: stops.x, y: stops.y, text: stops.text,
    marker: { symbol: "x", size: 7, color: HPO.STATE_COLORS.PRUNED, line: { width: 1 } },
    hovertemplate: "%{text}<br>%{y}<extra></extra>",
  });
  return HPO.plots.render(div, lines, { xaxis: { title: { text: "step" } }, yaxis: { title: { text: "intermediate value" } } });
};

function intermediateDensity(div, study, curves) {
  const x = [], y = [];
  const prunedAt = new Map();
  for (const trial of curves) {
    for (const [step, value] of trial.intermediate) { x.push(step); y.push(value); }
    if (trial.state === "PRUNED") {
      const step = trial.intermediate[trial.intermediate.length - 1][0];
      prunedAt.set(step, (prunedAt.get(step) || 0) + 1);
    }
  }
  const steps = new Set(x).size;
  const best = completeTrials(study, 0)
    .sort((a, b) => (minimizes(study, 0) ? 1 : -1) * (objectiveValue(a, 0) - objectiveValue(b, 0)))
    .slice(0, 10);
  const bestLine = { x: [], y: [], text: [] };
  for (const trial of best) {
    for (const [step, value] of trial.intermediate) { bestLine.x.push(step); bestLine.y.push(value); bestLine.text.push("trial " + trial.number); }
    bestLine.x.push(null); bestLine.y.push(null); bestLine.text.push("");
  }
  const prunedSteps = [...prunedAt.keys()].sort((a, b) => a - b);
  return HPO.plots.render(div, [
    {
      type: "histogram2d", name: "all " + curves.length + " trials", x, y, nbinsx: Math.min(steps, 80), nbinsy: 60,
      colorscale: [[0, "rgba(255,255,255,0)"], [0.0001, "#e3ecf8"], [1, "#1f4e9c"]], showscale: false, showlegend: true,
      hovertemplate: "step %{x}<br>value %{y}<br>%{z} values<extra></extra>",
    },
    { type: "scatter", mode: "lines", name: "10 best trials", x: bestLine.x, y: bestLine.y, text: bestLine.text, line: { color: "#d62728", width: 1.2 }, hovertemplate: "%{text}<br>step %{x}: %{y}<extra></extra>" },
    { type: "bar", name: "trials pruned at this step", x: prunedSteps, y: prunedSteps.map((s) => prunedAt.get(s)), yaxis: "y2", marker: { color: HPO.STATE_COLORS.PRUNED }, hovertemplate: "%{y} pruned at step %{x}<extra></extra>" },
  ], {
    xaxis: { title: { text: "step" } },
    yaxis: { title: { text: "intermediate value" }, domain: [0.3, 1] },
    yaxis2: { title: { text: "pruned" }, domain: [0, 0.2], anchor: "x", gridcolor: "#eef0f4" },
    bargap: 0.2,
  });
}

// A dimension of the parallel-coordinates plot: categorical -> indices with labels, log scale -> log10 with decades.
function dimension(spec, trials) {
  const label = HPO.fmt(spec.name); // parcoords sets labels as plain text (no markup), so no entities here
  const raw = trials.map((t) => t.params[spec.name]);
  if (spec.type === "categorical" || raw.some((v) => typeof v !== "number")) {
    const choices = spec.choices ? spec.choices.map((c) => HPO.fmt(c)) : [...new Set(raw.map((v) => HPO.fmt(v)))];
    return { label, values: raw.map((v) => choices.indexOf(HPO.fmt(v))), tickvals: choices.map((_, i) => i), ticktext: choices.map((c) => HPO.short(c, 24)) };
  }
  if (spec.log) {
    const logs = raw.map((v) => Math.log10(v));
    const low = Math.floor(Math.min(...logs)), high = Math.ceil(Math.max(...logs));
    const tickvals = [];
    for (let decade = low; decade <= high; decade += 1) tickvals.push(decade);
    return { label, values: logs, tickvals, ticktext: tickvals.map((d) => "1e" + d) };
  }
  return { label, values: raw };
}

HPO.plots.parallel = function parallel(div, study, objective) {
  const complete = completeTrials(study, objective);
  // Conditional parameters are missing from some trials; parcoords needs every value, so show shared parameters only.
  const specs = study.params.filter((p) => complete.every((t) => p.name in t.params));
  if (complete.length < 2 || !specs.length) return HPO.plots.empty(div, "needs 2 completed trials with parameters");
  const values = complete.map((t) => objectiveValue(t, objective));
  const dimensions = [{ label: HPO.fmt(study.summary.objectives[objective]), values }].concat(specs.map((spec) => dimension(spec, complete)));
  return HPO.plots.render(div, [{
    type: "parcoords", dimensions,
    line: { color: values, colorscale: "Viridis", reversescale: !minimizes(study, objective), showscale: true, colorbar: { thickness: 10 } },
  }], { margin: { l: 60, r: 60, t: 40, b: 24 } });
};

HPO.plots.importance = function importance(div, result) {
  const entries = Object.entries(result.importances || {});
  if (!entries.length) return HPO.plots.empty(div, result.note || "no importance yet");
  entries.sort((a, b) => a[1] - b[1]);
  return HPO.plots.render(div, [{
    type: "bar", orientation: "h", x: entries.map((e) => e[1]), y: entries.map((e) => HPO.plotText(e[0])),
    marker: { color: "#3b5bdb" }, hovertemplate: "%{y}: %{x:.3f}<extra></extra>",
  }], { showlegend: false, margin: { l: 120, r: 20, t: 16, b: 40 }, xaxis: { title: { text: "importance" }, range: [0, 1] }, yaxis: { automargin: true } });
};

HPO.plots.slices = function slices(div, study, objective) {
  const complete = completeTrials(study, objective);
  const specs = study.params.slice(0, 12);
  if (!complete.length || !specs.length) return HPO.plots.empty(div, "no completed trials with parameters yet");
  const columns = Math.min(specs.length, 4);
  const rows = Math.ceil(specs.length / columns);
  const traces = [];
  const layout = { showlegend: false, grid: { rows, columns, pattern: "independent", xgap: 0.08, ygap: 0.3 }, margin: { l: 60, r: 20, t: 16, b: 40 } };
  specs.forEach((spec, index) => {
    const suffix = index === 0 ? "" : String(index + 1);
    const having = complete.filter((t) => spec.name in t.params);
    traces.push({
      type: markerType(complete.length), mode: "markers", xaxis: "x" + suffix, yaxis: "y" + suffix,
      x: having.map((t) => (spec.type === "categorical" ? HPO.plotText(HPO.short(t.params[spec.name], 24)) : t.params[spec.name])),
      y: having.map((t) => objectiveValue(t, objective)),
      text: having.map((t) => "trial " + t.number),
      marker: { size: 5, color: having.map((t) => t.number), colorscale: "Viridis", opacity: 0.85, showscale: index === 0, colorbar: index === 0 ? { title: { text: "trial" }, thickness: 10 } : undefined },
      hovertemplate: "%{text}<br>%{x}: %{y}<extra></extra>",
    });
    layout["xaxis" + suffix] = { title: { text: HPO.plotText(spec.name) }, type: spec.log ? "log" : spec.type === "categorical" ? "category" : "linear", gridcolor: "#eef0f4" };
    layout["yaxis" + suffix] = { title: { text: index % columns === 0 ? objectiveLabel(study, objective) : "" }, gridcolor: "#eef0f4" };
  });
  div.style.height = Math.max(280, rows * 260) + "px";
  return HPO.plots.render(div, traces, layout);
};

// A timeline lane: the trial's slot (set by the scheduler), on its host when known; trials run in-process have no
// slot and share their host's lane.
function laneOf(trial) {
  const slot = trial.user_attrs.slot;
  const host = trial.user_attrs.host;
  const where = host ? HPO.plotText(host) : "";
  if (slot === undefined || slot === null) return where || "trials";
  const name = HPO.fmt(slot); // the scheduler names slots ("cpu 0", "gpu 0,1"); bare numbers get a prefix
  return (where ? where + " · " : "") + HPO.plotText(/^\d+$/.test(name) ? "slot " + name : name);
}

HPO.plots.timeline = function timeline(div, study) {
  const now = Date.now();
  const traces = {};
  const lanes = new Set();
  for (const trial of study.trials) {
    if (trial.start === null) continue;
    const lane = laneOf(trial);
    lanes.add(lane);
    const trace = traces[trial.state] || (traces[trial.state] = { x: [], y: [], text: [] });
    const label = "trial " + trial.number + " · " + trial.state.toLowerCase();
    // One bar per piece of training: a paused and resumed trial (ASHA, PBT) has several, with gaps while it waited.
    const pieces = trial.pieces && trial.pieces.length ? trial.pieces : [[trial.start, trial.end]];
    for (const [start, end] of pieces) {
      trace.x.push(start * 1000, end === null ? now : end * 1000, null); trace.y.push(lane, lane, null); trace.text.push(label, label, "");
    }
  }
  if (!lanes.size) return HPO.plots.empty(div, "no trial has started yet");
  const order = [...lanes].sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
  const data = HPO.STATES.filter((s) => traces[s]).map((state) => ({
    type: "scatter", mode: "lines", name: state.toLowerCase(), x: traces[state].x, y: traces[state].y, text: traces[state].text,
    line: { color: HPO.STATE_COLORS[state], width: 12 }, hovertemplate: "%{text}<br>%{x}<extra></extra>",
  }));
  div.style.height = Math.max(220, 90 + order.length * 34) + "px";
  return HPO.plots.render(div, data, {
    xaxis: { type: "date", title: { text: "time" } },
    yaxis: { type: "category", categoryorder: "array", categoryarray: order, automargin: true },
    margin: { l: 90, r: 20, t: 16, b: 44 },
  });
};

HPO.plots.pareto = function pareto(div, study, first, second, frontNumbers) {
  const complete = study.trials.filter((t) => t.state === "COMPLETE" && t.values);
  if (!complete.length) return HPO.plots.empty(div, "no completed trials yet");
  const onFront = new Set(frontNumbers);
  const groups = [
    { name: "Pareto front", trials: complete.filter((t) => onFront.has(t.number)), color: "#d62728", size: 8 },
    { name: "other trials", trials: complete.filter((t) => !onFront.has(t.number)), color: "#9fb3d1", size: 5 },
  ];
  return HPO.plots.render(div, groups.map((group) => ({
    type: "scatter", mode: "markers", name: group.name, x: group.trials.map((t) => t.values[first]), y: group.trials.map((t) => t.values[second]),
    text: group.trials.map((t) => "trial " + t.number), marker: { color: group.color, size: group.size },
    hovertemplate: "%{text}<br>(%{x}, %{y})<extra></extra>",
  })), { xaxis: { title: { text: objectiveLabel(study, first) } }, yaxis: { title: { text: objectiveLabel(study, second) } } });
};

// Curves of one metric for one or more runs: series = [{name, x, y}].
HPO.plots.curves = function curves(div, series, yTitle) {
  const data = series.filter((s) => s.x.length).map((s, index) => ({
    type: "scatter", mode: s.x.length > 60 ? "lines" : "lines+markers", name: HPO.plotText(s.name), x: s.x, y: s.y,
    line: { width: 1.5, color: index === 0 ? "#3b5bdb" : index === 1 ? "#e8590c" : undefined }, marker: { size: 4 },
  }));
  if (!data.length) return HPO.plots.empty(div, "no values");
  return HPO.plots.render(div, data, {
    showlegend: series.length > 1, margin: { l: 56, r: 12, t: 12, b: 36 },
    xaxis: { title: { text: "step" } }, yaxis: { title: { text: HPO.plotText(yTitle) } },
  });
};

// PBT: each member's score at every interval, one line per member, with a marker where it copied another member.
HPO.plots.population = function population(div, pop, yTitle) {
  const members = pop.members.filter((m) => m.scores.length);
  if (!members.length) return HPO.plots.empty(div, "no member has reached an interval yet");
  const traces = members.map((m) => ({
    type: "scatter", mode: "lines+markers", name: "member " + m.member, x: m.scores.map((s) => s[0]), y: m.scores.map((s) => s[1]),
    line: { width: pop.winner && pop.winner.member === m.member ? 3 : 1.2 }, marker: { size: 4 },
    hovertemplate: "member " + m.member + "<br>step %{x}: %{y}<extra></extra>",
  }));
  const jumps = { x: [], y: [], text: [] };
  for (const m of members) {
    const at = new Map(m.scores);
    for (const [step, source] of m.copies) {
      jumps.x.push(step); jumps.y.push(at.get(step)); jumps.text.push("member " + m.member + " copied member " + source + " at step " + step);
    }
  }
  traces.push({
    type: "scatter", mode: "markers", name: "exploit (copy)", x: jumps.x, y: jumps.y, text: jumps.text,
    marker: { symbol: "triangle-up", size: 9, color: "#d62728" }, hovertemplate: "%{text}<extra></extra>",
  });
  return HPO.plots.render(div, traces, { xaxis: { title: { text: "step" } }, yaxis: { title: { text: HPO.plotText(yTitle) } } });
};
