// A trial or a single run: its parameters, every metric curve the experiment store holds (loss, eval metrics, learning
// rate, grad norm, throughput), the values reported to Optuna, events and checkpoints. Live while it runs.
"use strict";

class RunView {
  constructor(app, id) {
    this.app = app;
    this.id = id;
    this.signature = "";
  }

  async load() {
    const data = await HPO.api("/api/run", { id: this.id });
    await this.render(data);
    HPO.markPainted();
  }

  async refresh() {
    const data = await HPO.api("/api/run", { id: this.id });
    if (this.signature !== signatureOf(data)) await this.render(data);
  }

  async render(data) {
    const h = HPO.h;
    this.signature = signatureOf(data);
    const run = data.run || {};
    const trial = data.trial;
    document.title = HPO.runTitle(data) + " · hpo dashboard";
    const curves = h("div", { className: "grid3", id: "curves" });
    const cards = [];
    if (data.study) cards.push(HPO.card("Export this trial", HPO.commandBox(data.study.export)));
    const params = trial ? trial.params : run.params;
    HPO.append(HPO.clear(this.app), [
      h("h1", {}, HPO.runTitle(data)),
      data.study ? h("p", {}, HPO.link("/study", { name: data.study.name }, "← study " + data.study.name), " · ", h("code", {}, data.id)) : h("p", {}, h("code", {}, data.id)),
      runChips(data),
      h("div", { className: "grid" }, HPO.card("Parameters", HPO.keyValues(params), { id: "params" }),
        HPO.card("Attributes", HPO.keyValues(attributesOf(data)), { id: "attributes" })),
      cards.length ? h("div", { className: "grid" }, cards) : null,
      h("h2", {}, "Curves"),
      curves,
      h("div", { className: "grid" }, HPO.card("Events", eventsTable(data.events)), HPO.card("Checkpoints and exports", artifactsTable(data.artifacts))),
      trial && trial.user_attrs.traceback ? HPO.card("Traceback", h("pre", {}, String(trial.user_attrs.traceback)), { wide: true }) : null,
      run.arguments ? h("details", {}, h("summary", {}, "Training arguments"), h("pre", {}, JSON.stringify(run.arguments, null, 2))) : null,
      run.command ? h("details", {}, h("summary", {}, "Command, commit and packages"),
        h("pre", {}, [run.command, "git " + (run.git_commit || "?"), JSON.stringify(run.packages || {}, null, 2)].join("\n"))) : null,
      HPO.report ? null : h("p", {}, "Compare with another trial or run: ", compareForm(data.id)),
    ]);
    const plots = [];
    const addCurve = (title, series) => {
      const div = h("div", { className: "plot small" });
      curves.appendChild(HPO.card(title, div));
      plots.push(HPO.plots.curves(div, series, title));
    };
    if (trial && trial.intermediate.length) {
      addCurve("reported to Optuna", [{ name: "intermediate value", x: trial.intermediate.map((p) => p[0]), y: trial.intermediate.map((p) => p[1]) }]);
    }
    for (const name of sortMetricNames(Object.keys(data.metrics))) {
      const metric = data.metrics[name];
      addCurve(name, [{ name, x: metric.step, y: metric.value }]);
    }
    if (!plots.length) curves.appendChild(h("p", { className: "muted" }, "no metrics recorded (yet)"));
    await Promise.all(plots);
  }
}

function attributesOf(data) {
  const attrs = Object.assign({}, data.trial ? data.trial.user_attrs : {});
  delete attrs.traceback;
  const run = data.run || {};
  for (const key of ["kind", "status", "output_dir", "git_commit"]) if (run[key] !== undefined && run[key] !== null) attrs[key] = run[key];
  return attrs;
}

function signatureOf(data) {
  const counts = Object.entries(data.metrics).map(([name, m]) => name + ":" + m.step.length).join(",");
  return [data.trial ? data.trial.state : "", data.trial ? data.trial.intermediate.length : 0, data.run ? data.run.status : "", counts, data.events.length, data.artifacts.length].join("|");
}

function compareForm(id) {
  const h = HPO.h;
  const input = h("input", { type: "search", placeholder: "other trial or run id, e.g. my-study/trial-3", size: 40, "aria-label": "compare with" });
  const go = h("button", { type: "button" }, "compare");
  go.addEventListener("click", () => {
    if (input.value.trim()) window.location.href = "/compare?" + HPO.query({ a: id, b: input.value.trim() });
  });
  return h("span", { className: "table-tools" }, input, go);
}

HPO.start(async (app) => {
  const id = HPO.params().id || (HPO.report && HPO.report.run);
  if (!id) throw new Error("no run named in the address (?id=...)");
  HPO.loadPlotly().catch(HPO.showError); // the curves are the page: load the bundle while the API answers
  const view = new RunView(app, id);
  await view.load();
  HPO.poll(() => view.refresh(), 3000);
});
