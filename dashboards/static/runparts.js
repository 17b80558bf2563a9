// Parts shared by the run page and the comparison page: metric ordering, the run title and chips, event and artifact
// tables.
"use strict";

// Metrics worth seeing first; the rest follow alphabetically.
const METRIC_ORDER = ["loss", "eval_loss", "learning_rate", "grad_norm"];

function metricRank(name) {
  const index = METRIC_ORDER.indexOf(name);
  if (index >= 0) return [0, index, name];
  if (name.startsWith("eval_")) return [1, 0, name];
  if (name.includes("per_second")) return [3, 0, name];
  return [2, 0, name];
}

function sortMetricNames(names) {
  return names.sort((a, b) => {
    const ra = metricRank(a), rb = metricRank(b);
    return ra[0] - rb[0] || ra[1] - rb[1] || ra[2].localeCompare(rb[2]);
  });
}

HPO.runTitle = function runTitle(data) {
  if (data.trial && data.study) return "trial " + data.trial.number + " of " + data.study.name;
  return (data.run && data.run.name) || data.id;
};

function fmtBytes(count) {
  if (count >= 2 ** 30) return (count / 2 ** 30).toFixed(2) + " GiB";
  return (count / 2 ** 20).toFixed(1) + " MiB";
}

function runChips(data) {
  const h = HPO.h;
  const run = data.run || {};
  const trial = data.trial;
  const chips = [];
  const state = trial ? trial.state : run.status;
  if (state) chips.push(HPO.stateChip(String(state).toUpperCase()));
  if (trial && trial.values) chips.push(h("span", { className: "chip" }, "value " + trial.values.map(HPO.fmt).join(", ")));
  else if (run.objective !== null && run.objective !== undefined) chips.push(h("span", { className: "chip" }, "objective " + HPO.fmt(run.objective)));
  const start = trial ? trial.start : run.started_at;
  const end = trial ? trial.end : run.ended_at;
  if (start) chips.push(h("span", { className: "chip" }, "started " + HPO.fmtTime(start)));
  if (start && end) chips.push(h("span", { className: "chip" }, "took " + HPO.fmtDuration(end - start)));
  const attrs = trial ? trial.user_attrs : {};
  for (const key of ["host", "slot", "devices"]) {
    const value = attrs[key] !== undefined ? attrs[key] : run[key];
    if (HPO.fmt(value) !== "") chips.push(h("span", { className: "chip" }, key + " " + HPO.fmt(value)));
  }
  // Memory peaks: the trial's attributes (Optuna), else the run's columns (the store).
  for (const [key, label] of [["peak_gpu_memory", "peak GPU memory"], ["peak_rss", "peak RSS"]]) {
    const value = typeof attrs[key] === "number" ? attrs[key] : run[key];
    if (typeof value === "number") chips.push(h("span", { className: "chip memory" }, label + " " + fmtBytes(value)));
  }
  // What the trial trained and keeps on disk (an adapter's parameters and checkpoint under peft:).
  const trained = typeof attrs.trainable_params === "number" ? attrs.trainable_params : run.trainable_params;
  if (typeof trained === "number") chips.push(h("span", { className: "chip footprint" }, "trained params " + trained.toLocaleString("en-US")));
  const stored = typeof attrs.checkpoint_bytes === "number" ? attrs.checkpoint_bytes : run.checkpoint_bytes;
  if (typeof stored === "number") chips.push(h("span", { className: "chip footprint" }, "checkpoint " + fmtBytes(stored)));
  return h("div", { className: "chips" }, chips);
}

function eventsTable(events) {
  const h = HPO.h;
  if (!events.length) return h("p", { className: "muted" }, "no events recorded");
  return h("div", { className: "scroll" }, h("table", { id: "events" },
    h("thead", {}, h("tr", {}, ["time", "kind", "message", "data"].map((c) => h("th", {}, c)))),
    h("tbody", {}, events.map((e) => h("tr", {}, h("td", {}, HPO.fmtTime(e.time)), h("td", {}, HPO.fmt(e.kind)), h("td", {}, HPO.fmt(e.message)), h("td", {}, h("code", {}, HPO.fmt(e.data))))))));
}

function artifactsTable(artifacts) {
  const h = HPO.h;
  if (!artifacts.length) return h("p", { className: "muted" }, "no checkpoints or exports recorded");
  return h("table", { id: "artifacts" },
    h("thead", {}, h("tr", {}, ["kind", "step", "path", "size", "sha256", "time"].map((c) => h("th", {}, c)))),
    h("tbody", {}, artifacts.map((a) => h("tr", {}, h("td", {}, HPO.fmt(a.kind)), h("td", { className: "num" }, HPO.fmt(a.step)), h("td", {}, h("code", {}, HPO.fmt(a.path))),
      h("td", { className: "num" }, a.size ? (a.size / 1e6).toFixed(2) + " MB" : ""), h("td", {}, h("code", {}, String(a.sha256 || "").slice(0, 16))), h("td", {}, HPO.fmtTime(a.time))))));
}

