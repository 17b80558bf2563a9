// The study page: summary, best trial with its export command, the plots, and the trial table. Polls for new and
// unfinished trials only (`from` / `refresh`), so a live 10,000-trial study costs little per update.
"use strict";

class StudyView {
  constructor(app, name) {
    this.app = app;
    this.name = name;
    this.trials = new Map();
    this.objective = 0;
    this.paretoAxes = [0, 1];
    this.data = null;
  }

  get study() {
    return { summary: this.data.summary, params: this.data.params, trials: this.sortedTrials };
  }

  merge(data) {
    let changed = false;
    for (const trial of data.trials) {
      const known = this.trials.get(trial.number);
      if (!known || known.state !== trial.state || known.intermediate.length !== trial.intermediate.length || known.end !== trial.end) {
        this.trials.set(trial.number, trial);
        changed = true;
      }
    }
    if (changed) this.sortedTrials = [...this.trials.values()].sort((a, b) => a.number - b.number);
    const paramsChanged = !this.data || JSON.stringify(this.data.params.map((p) => p.name)) !== JSON.stringify(data.params.map((p) => p.name));
    this.data = { summary: data.summary, params: data.params, export: data.export, population: data.population };
    return { changed, paramsChanged };
  }

  async load() {
    // performance marks: the paint benchmark prints where the time goes.
    const answer = await HPO.api("/api/study", { name: this.name });
    performance.mark("hpo-data");
    this.merge(answer);
    this.build();
    this.renderSummary();
    performance.mark("hpo-summary");
    this.table.setRows(this.sortedTrials);
    performance.mark("hpo-table");
    // The first screen (summary, best trial, the trial table) needs no Plotly: it paints before the bundle is even
    // requested. Then Plotly loads and the plots below draw, those on screen first.
    await HPO.afterPaint();
    this.recordFirstScreen();
    HPO.markPainted();
    this.plotQueue = new HPO.PlotQueue(this.plotDivs, this.plotJobs());
    this.loadImportance().catch(HPO.showError); // the server computes it while the plots draw
    await this.plotQueue.draw();
    await HPO.afterPaint();
    performance.mark("hpo-all-plots");
    window.hpoAllPlotsMs = performance.now();
    document.body.dataset.allPlots = "1";
  }

  // What the first screen held when it was marked painted: the paint benchmark checks it measured table rows in view.
  recordFirstScreen() {
    const rows = this.table.body.rows;
    window.hpoFirstScreen = {
      rows: rows.length,
      firstRowTop: rows.length ? rows[0].getBoundingClientRect().top : null,
      viewportHeight: window.innerHeight,
      plotlyLoaded: Boolean(window.Plotly),
    };
  }

  async refresh() {
    const unfinished = this.sortedTrials.filter((t) => t.state === "RUNNING" || t.state === "WAITING").map((t) => t.number);
    const next = this.sortedTrials.length ? this.sortedTrials[this.sortedTrials.length - 1].number + 1 : 0;
    const { changed, paramsChanged } = this.merge(await HPO.api("/api/study", { name: this.name, from: next, refresh: unfinished.join(",") || undefined }));
    this.renderSummary();
    if (paramsChanged) this.table.setColumns(this.columns());
    if (!changed) return undefined;
    const started = performance.now();
    this.table.setRows(this.sortedTrials);
    await this.renderPlots();
    await this.loadImportance();
    // A big study takes a while to redraw: poll less often than that costs, so the page stays responsive.
    return 3 * (performance.now() - started);
  }

  build() {
    const h = HPO.h;
    const multi = this.data.summary.directions.length > 1;
    this.header = h("div");
    this.bestCard = h("div");
    this.runningCard = h("div");
    this.plotDivs = {};
    const plot = (key, extra) => (this.plotDivs[key] = h("div", { className: "plot " + (extra || ""), id: "plot-" + key }));
    const cards = [
      HPO.card("Optimization history", plot("history")),
      HPO.card("Intermediate values", plot("intermediate"), { note: "pruned trials: marked where they stopped" }),
      HPO.card("Parallel coordinates", plot("parallel")),
      HPO.card("Parameter importance", plot("importance"), { note: "Optuna's PED-ANOVA, completed trials" }),
      HPO.card("Slices", plot("slices"), { wide: true }),
      HPO.card("Timeline by slot", plot("timeline"), { wide: true }),
    ];
    if (multi) cards.push(HPO.card("Pareto front", [this.paretoPicker(), plot("pareto", "tall")], { wide: true }));
    if (this.data.population) {
      this.scheduleCard = h("div", { id: "winning-schedule" });
      cards.unshift(
        HPO.card("Population (PBT)", plot("population"), { note: "score per member at each interval; ▲ where a member copied another" }),
        HPO.card("Winning schedule", this.scheduleCard, { note: "what `hpo retrain --replay` trains" })
      );
    }
    const tableHost = h("div");
    this.picked = [];
    this.compareLink = h("p", { className: "compare-link" });
    this.updateCompareLink();
    HPO.clear(this.app);
    // The trial table comes before the plots: it is the first screen, drawn without waiting for Plotly.
    HPO.append(this.app, [
      this.header,
      h("div", { className: "grid" }, HPO.card(multi ? "Pareto-optimal trials" : "Best trial", this.bestCard), HPO.card("Running now", this.runningCard)),
      h("div", { className: "grid" }, HPO.card("Trials", [tableHost, HPO.report ? null : this.compareLink], { wide: true, id: "trials" })),
      h("div", { className: "grid" }, cards),
    ]);
    this.table = new HPO.Table(tableHost, { columns: this.columns(), stateFilter: true, sortKey: "number", sortDir: 1 });
  }

  paretoPicker() {
    const objectives = this.data.summary.objectives;
    const picker = (index) => {
      const select = HPO.h("select", { className: "objective-picker" }, objectives.map((name, i) => HPO.h("option", { value: i, selected: i === this.paretoAxes[index] }, name)));
      select.addEventListener("change", () => { this.paretoAxes[index] = Number(select.value); this.renderPareto(); });
      return select;
    };
    return HPO.h("div", { className: "table-tools" }, "x:", picker(0), "y:", picker(1));
  }

  updateCompareLink() {
    const h = HPO.h;
    const ids = this.picked.map((number) => this.name + "/trial-" + number);
    HPO.clear(this.compareLink).appendChild(ids.length === 2
      ? h("a", { href: "/compare?" + HPO.query({ a: ids[0], b: ids[1] }) }, "compare trials " + this.picked.join(" and "))
      : h("span", { className: "muted" }, "tick two trials to compare them side by side"));
  }

  pick(number, on) {
    this.picked = this.picked.filter((n) => n !== number);
    if (on) this.picked = this.picked.concat([number]).slice(-2);
    this.updateCompareLink();
    this.table.render();
  }

  columns() {
    const objectives = this.data.summary.objectives;
    const columns = [];
    if (!HPO.report) {
      columns.push({
        key: "pick", label: "⇄", searchable: false, value: (t) => (this.picked.includes(t.number) ? 1 : 0),
        cell: (t) => {
          const box = HPO.h("input", { type: "checkbox", checked: this.picked.includes(t.number), "aria-label": "compare trial " + t.number });
          box.addEventListener("change", () => this.pick(t.number, box.checked));
          return box;
        },
      });
    }
    columns.push(
      { key: "number", label: "#", numeric: true, value: (t) => t.number, cell: (t) => HPO.link("/run", { id: this.name + "/trial-" + t.number }, String(t.number)) },
      { key: "state", label: "state", value: (t) => t.state, cell: (t) => HPO.h("span", { className: "state " + t.state }, t.paused ? "paused" : t.state.toLowerCase()) }
    );
    objectives.forEach((objective, i) => columns.push({ key: "value" + i, label: objective, numeric: true, value: (t) => (t.values ? t.values[i] : null) }));
    for (const param of this.data.params) columns.push({ key: "param:" + param.name, label: param.name, numeric: param.type !== "categorical", value: (t) => t.params[param.name] });
    columns.push(
      { key: "duration", label: "duration", numeric: true, nowrap: true, value: (t) => t.duration, cell: (t) => HPO.fmtDuration(t.duration) },
      { key: "slot", label: "slot", nowrap: true, value: (t) => t.user_attrs.slot },
      { key: "pruned_step", label: "pruned at", numeric: true, value: (t) => (t.state === "PRUNED" ? lastStep(t) : null) },
      { key: "error", label: "error", value: (t) => t.user_attrs.error }
    );
    // ASHA: each trial's path through the rungs (pause point: value), "paused" where it waits for a promotion.
    if ((this.data.summary.rungs || []).length) columns.push({ key: "rungs", label: "rungs", value: (t) => rungText(t) });
    return columns;
  }

  renderSummary() {
    const h = HPO.h;
    const summary = this.data.summary;
    this.renderRunning(); // elapsed times move on every poll
    // Rebuild the header only when it changed, so an open objective picker is not closed under the user's pointer.
    const signature = JSON.stringify([summary.n_trials, summary.states, summary.best, summary.rungs, this.data.export]);
    if (signature === this.summarySignature) return;
    this.summarySignature = signature;
    const multi = summary.directions.length > 1;
    const directions = summary.objectives.map((name, i) => name + ": " + summary.directions[i]).join(", ");
    const chips = [h("span", { className: "chip" }, directions), h("span", { className: "chip" }, summary.n_trials + " trials")];
    for (const state of HPO.STATES) if (summary.states[state]) chips.push(HPO.stateChip(state, summary.states[state]));
    for (const rung of summary.rungs || []) chips.push(h("span", { className: "chip rung" }, "rung " + rung.point + ": " + rung.reached + " reached, " + rung.paused + " paused, " + rung.promoted + " promoted"));
    const title = [h("h1", {}, summary.name), h("div", { className: "chips" }, chips)];
    if (multi) {
      const select = h("select", { className: "objective-picker", "aria-label": "objective" }, summary.objectives.map((name, i) => h("option", { value: i, selected: i === this.objective }, name)));
      select.addEventListener("change", () => { this.objective = Number(select.value); this.renderPlots(); this.loadImportance(); });
      title.push(h("div", { className: "table-tools" }, "objective shown in history, slices, parallel coordinates and importance:", select));
    }
    HPO.append(HPO.clear(this.header), title);
    this.renderBest();
  }

  renderBest() {
    const h = HPO.h;
    const best = this.data.summary.best;
    const node = HPO.clear(this.bestCard);
    if (!best.numbers.length) { node.appendChild(h("p", { className: "muted" }, "no completed trial yet")); return; }
    for (const number of best.numbers.slice(0, 5)) {
      const trial = this.trials.get(number);
      const values = trial && trial.values ? trial.values.map(HPO.fmt).join(", ") : "";
      HPO.append(node, [
        h("p", {}, HPO.link("/run", { id: this.name + "/trial-" + number }, "trial " + number), " · value ", h("strong", {}, values)),
        trial && best.numbers.length === 1 ? HPO.keyValues(trial.params) : null,
        HPO.commandBox(this.data.export[String(number)]),
      ]);
    }
    if (best.numbers.length > 5) node.appendChild(h("p", { className: "muted" }, (best.numbers.length - 5) + " more on the front (see the plot)"));
  }

  renderRunning() {
    const h = HPO.h;
    const running = this.data.summary.running;
    const node = HPO.clear(this.runningCard);
    if (!running.length) { node.appendChild(h("p", { className: "muted" }, "nothing running")); return; }
    const now = Date.now() / 1000;
    node.appendChild(h("table", {}, h("thead", {}, h("tr", {}, ["trial", "slot", "devices", "host", "running for"].map((c) => h("th", {}, c)))),
      h("tbody", {}, running.map((r) => h("tr", {},
        h("td", {}, HPO.link("/run", { id: this.name + "/trial-" + r.number }, String(r.number))),
        h("td", {}, HPO.fmt(r.slot)), h("td", {}, HPO.fmt(r.devices)), h("td", {}, HPO.fmt(r.host)),
        h("td", {}, !r.start ? "" : HPO.report ? "since " + HPO.fmtTime(r.start) : HPO.fmtDuration(now - r.start)))))));
  }

  renderPareto() {
    if (!this.plotDivs.pareto) return Promise.resolve();
    return HPO.plots.pareto(this.plotDivs.pareto, this.study, this.paretoAxes[0], this.paretoAxes[1], this.data.summary.best.numbers);
  }

  // Each job reads the view's current trials and objective when it runs (the queue may run it later).
  plotJobs() {
    const p = this.plotDivs;
    return {
      history: () => HPO.plots.history(p.history, this.study, this.objective),
      intermediate: () => HPO.plots.intermediate(p.intermediate, this.study),
      parallel: () => HPO.plots.parallel(p.parallel, this.study, this.objective),
      importance: () => (this.importance ? HPO.plots.importance(p.importance, this.importance) : HPO.plots.empty(p.importance, "computing…")),
      slices: () => HPO.plots.slices(p.slices, this.study, this.objective),
      timeline: () => HPO.plots.timeline(p.timeline, this.study),
      pareto: () => this.renderPareto(),
      population: () => { this.renderSchedule(); return HPO.plots.population(p.population, this.data.population, this.data.summary.objectives[0]); },
    };
  }

  renderSchedule() {
    const h = HPO.h;
    const winner = this.data.population && this.data.population.winner;
    const node = HPO.clear(this.scheduleCard);
    if (!winner) { node.appendChild(h("p", { className: "muted" }, "no member has finished yet")); return; }
    let previous = {};
    const rows = winner.schedule.map((entry) => {
      const changed = Object.entries(entry.params).filter(([k, v]) => previous[k] !== v).map(([k, v]) => k + " = " + HPO.fmt(v)).join(", ");
      previous = entry.params;
      const by = "member " + entry.member + (entry.copied_from === null ? "" : " (copied member " + entry.copied_from + ")");
      return h("tr", {}, h("td", {}, String(entry.step)), h("td", {}, changed), h("td", {}, by));
    });
    HPO.append(node, [
      h("p", {}, "member " + winner.member + " (trial " + winner.trial + ") · value ", h("strong", {}, HPO.fmt(winner.value))),
      h("table", {}, h("thead", {}, h("tr", {}, ["from step", "hyperparameters", "trained by"].map((c) => h("th", {}, c)))), h("tbody", {}, rows)),
    ]);
  }

  renderPlots() {
    return this.plotQueue ? this.plotQueue.draw() : Promise.resolve();
  }

  async loadImportance() {
    const objective = this.objective;
    const result = await HPO.api("/api/importance", { study: this.name, objective });
    if (objective !== this.objective) return;
    if (result.status === "computing") {
      clearTimeout(this.importanceRetry);
      this.importanceRetry = setTimeout(() => this.loadImportance().catch(HPO.showError), 700);
      return;
    }
    this.importance = result;
    await HPO.plots.importance(this.plotDivs.importance, result);
    document.body.dataset.importance = "ready";
  }
}

function lastStep(trial) {
  if (trial.user_attrs.pruned_step !== undefined) return trial.user_attrs.pruned_step;
  return trial.intermediate.length ? trial.intermediate[trial.intermediate.length - 1][0] : null;
}

HPO.start(async (app) => {
  const name = HPO.params().name || (HPO.report && HPO.report.study);
  if (!name) throw new Error("no study named in the address (?name=...)");
  document.title = name + " · hpo dashboard";
  const view = new StudyView(app, name);
  window.hpoStudyView = view;
  await view.load();
  HPO.poll(() => view.refresh(), 2000);
});

function rungText(trial) {
  if (!trial.rungs) return null;
  const path = trial.rungs.map(([point, value]) => point + ": " + HPO.fmt(value)).join(" › ");
  return trial.paused ? path + " (paused)" : path;
}
