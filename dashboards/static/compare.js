// Two runs or trials side by side: parameters and arguments with the differences marked, and every metric both
// recorded drawn on one plot.
"use strict";

function flatten(prefix, object, into) {
  for (const [key, value] of Object.entries(object || {})) {
    if (value && typeof value === "object" && !Array.isArray(value)) flatten(prefix + key + ".", value, into);
    else into[prefix + key] = value;
  }
  return into;
}

function settingsOf(data) {
  const settings = {};
  flatten("param.", data.trial ? data.trial.params : (data.run || {}).params, settings);
  flatten("args.", (data.run || {}).arguments, settings);
  if (data.trial && data.trial.values) data.trial.values.forEach((v, i) => (settings["value." + i] = v));
  return settings;
}

function pickerForm(a, b) {
  const h = HPO.h;
  const inputA = h("input", { type: "search", value: a || "", size: 36, placeholder: "first trial or run id", "aria-label": "first" });
  const inputB = h("input", { type: "search", value: b || "", size: 36, placeholder: "second trial or run id", "aria-label": "second" });
  const go = h("button", { type: "button" }, "compare");
  go.addEventListener("click", () => {
    window.location.href = "/compare?" + HPO.query({ a: inputA.value.trim(), b: inputB.value.trim() });
  });
  return h("div", { className: "table-tools" }, inputA, inputB, go);
}

function differenceTable(left, right) {
  const h = HPO.h;
  const a = settingsOf(left), b = settingsOf(right);
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort((x, y) => {
    const dx = HPO.fmt(a[x]) !== HPO.fmt(b[x]), dy = HPO.fmt(a[y]) !== HPO.fmt(b[y]);
    return dx === dy ? x.localeCompare(y) : dx ? -1 : 1;
  });
  if (!keys.length) return h("p", { className: "muted" }, "no parameters or arguments recorded");
  return h("div", { className: "scroll" }, h("table", { id: "differences" },
    h("thead", {}, h("tr", {}, h("th", {}, "setting"), h("th", {}, HPO.runTitle(left)), h("th", {}, HPO.runTitle(right)))),
    h("tbody", {}, keys.map((key) => h("tr", { className: HPO.fmt(a[key]) !== HPO.fmt(b[key]) ? "diff" : null },
      h("td", {}, key), h("td", {}, HPO.fmt(a[key])), h("td", {}, HPO.fmt(b[key])))))));
}

function seriesOf(data) {
  const series = {};
  for (const [name, metric] of Object.entries(data.metrics)) series[name] = { x: metric.step, y: metric.value };
  if (data.trial && data.trial.intermediate.length) {
    series["reported to Optuna"] = { x: data.trial.intermediate.map((p) => p[0]), y: data.trial.intermediate.map((p) => p[1]) };
  }
  return series;
}

HPO.start(async (app) => {
  const h = HPO.h;
  const { a, b } = HPO.params();
  if (!a || !b) {
    HPO.append(HPO.clear(app), [h("h1", {}, "Compare two runs or trials"), pickerForm(a, b),
      h("p", { className: "muted" }, "Ids look like my-study/trial-3 for a trial, or as listed under single runs on the overview.")]);
    HPO.markPainted();
    return;
  }
  HPO.loadPlotly().catch(HPO.showError); // the curves are the page: load the bundle while the API answers
  const [left, right] = await Promise.all([HPO.api("/api/run", { id: a }), HPO.api("/api/run", { id: b })]);
  const curves = h("div", { className: "grid3", id: "curves" });
  HPO.append(HPO.clear(app), [
    h("h1", {}, "Compare"),
    pickerForm(a, b),
    h("div", { className: "grid" },
      [left, right].map((data) => HPO.card(HPO.runTitle(data), [h("code", {}, data.id),
        h("p", {}, HPO.link("/run", { id: data.id }, "open")), runChips(data)]))),
    HPO.card("Settings (differences first)", differenceTable(left, right), { wide: true }),
    h("h2", {}, "Curves"),
    curves,
  ]);
  const leftSeries = seriesOf(left), rightSeries = seriesOf(right);
  const names = sortMetricNames([...new Set([...Object.keys(leftSeries), ...Object.keys(rightSeries)])]);
  const plots = names.map((name) => {
    const div = h("div", { className: "plot small" });
    curves.appendChild(HPO.card(name, div));
    const series = [];
    if (leftSeries[name]) series.push({ name: HPO.runTitle(left), ...leftSeries[name] });
    if (rightSeries[name]) series.push({ name: HPO.runTitle(right), ...rightSeries[name] });
    return HPO.plots.curves(div, series, name);
  });
  if (!plots.length) curves.appendChild(h("p", { className: "muted" }, "no metrics recorded"));
  await Promise.all(plots);
  HPO.markPainted();
});
